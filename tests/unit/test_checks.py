"""Semantic checks at their boundaries, and suppressions; the bad-plan corpus covers each
check once, these pin down where a check starts and stops firing."""

from __future__ import annotations

from pathlib import Path

import pytest
from plan_text import findings, replace_once

from cluster_plan.plan.validate import validate_text

BASE = (Path(__file__).resolve().parents[1] / "plans" / "base.yml").read_text()


def edit(*pairs: tuple[str, str], text: str = BASE) -> str:
    return replace_once(text, *pairs)


def test_base_is_clean():
    assert findings(BASE) == []


LINE_RATE = ("error", "threshold-above-line-rate", "$.acceptance.network.min_gbps")


@pytest.mark.parametrize(
    ("network", "min_gbps", "fires"),
    [
        # 10 Gb/s links: about 9.4 Gb/s of TCP goodput at MTU 1500, about 9.9 at MTU 9000
        ("mgmt", 9.4, False),
        ("mgmt", 9.41, True),
        ("mgmt", 9.5, True),
        ("mgmt", 9, False),
        ("compute", 9.5, False),
        ("compute", 9.9, False),
        ("compute", 9.91, True),
        ("compute", 10, True),
    ],
)
def test_min_gbps_against_goodput(network, min_gbps, fires):
    text = edit(
        (
            "network: {networks: [compute], min_gbps: 9}",
            f"network: {{networks: [{network}], min_gbps: {min_gbps}}}",
        )
    )
    assert (LINE_RATE in findings(text)) is fires


def test_the_slowest_link_decides():
    # tor2's hosts are on 1 Gb/s ports now: 0.99 Gb/s at MTU 9000
    text = edit(
        (
            "tor2: {uplink: agg1, racks: [r2], link_gbps: 10",
            "tor2: {uplink: agg1, racks: [r2], link_gbps: 1",
        ),
        ("min_gbps: 9}", "min_gbps: 0.99}"),
    )
    assert LINE_RATE not in findings(text)
    assert LINE_RATE in findings(text.replace("min_gbps: 0.99}", "min_gbps: 1.0}"))


def test_a_slow_nic_caps_the_link():
    text = edit(
        (
            "  cpu: {cpu_cores: 2, memory_gb: 4, disks:",
            "  cpu: {cpu_cores: 2, memory_gb: 4, nics: [{name: eth0, speed_gbps: 1, "
            "networks: [compute]}], disks:",
        )
    )
    assert LINE_RATE in findings(text)
    assert LINE_RATE not in findings(text.replace("min_gbps: 9}", "min_gbps: 0.9}"))


@pytest.mark.parametrize(
    ("cidr", "hosts", "fires"),
    [
        ("10.41.0.0/29", 6, False),
        ("10.41.0.0/29", 7, True),  # a /29 holds 6 hosts
        ("10.41.0.0/28", 14, False),
        ("10.41.0.0/28", 15, True),
    ],
)
def test_capacity_boundary(cidr, hosts, fires):
    # base: 7 hosts, 1 of them in group cpu
    text = edit(
        ("compute: {cidr: 10.41.0.0/24", f"compute: {{cidr: {cidr}"),
        ("cpu: {count: 1,", f"cpu: {{count: {hosts - 6},"),
    )
    capacity = ("error", "network-capacity", "$.networks.compute.cidr")
    assert (capacity in findings(text)) is fires


def test_capacity_counts_reserved_addresses_inside_only():
    # mgmt /24: 254 hosts, minus 10.40.0.1-10.40.0.9 reserved = 245 for hosts
    text = edit(
        ("compute: {cidr: 10.41.0.0/24", "compute: {cidr: 10.41.0.0/16"),
        ("cpu: {count: 1,", "cpu: {count: 239,"),
    )  # 245 hosts
    assert ("error", "network-capacity", "$.networks.mgmt.cidr") not in findings(text)
    text = text.replace("cpu: {count: 239,", "cpu: {count: 240,")
    assert ("error", "network-capacity", "$.networks.mgmt.cidr") in findings(text)


@pytest.mark.parametrize(
    ("mons", "code"), [(1, "warning"), (3, None), (5, None), (2, "error"), (4, "error")]
)
def test_ceph_monitor_counts(mons, code):
    text = edit(
        ("stor: {count: 3,", f"stor: {{count: {mons},"), ("size: 3, pg_num", "size: 1, pg_num")
    )
    found = [f for f in findings(text) if f[1] == "ceph-monitors"]
    assert [f[0] for f in found] == ([code] if code else [])


@pytest.mark.parametrize(
    ("domain", "size", "fires"),
    [
        ("host", 3, False),
        ("host", 4, True),
        ("rack", 2, False),
        ("rack", 3, True),
        ("row", 1, False),
        ("row", 2, True),  # both racks are in row A
    ],
)
def test_ceph_failure_domains(domain, size, fires):
    text = edit(
        ("failure_domain: host", f"failure_domain: {domain}"),
        ("size: 3, pg_num", f"size: {size}, pg_num"),
    )
    found = ("error", "ceph-failure-domains", "$.storage.ceph.pools[0].size")
    assert (found in findings(text)) is fires


@pytest.mark.parametrize(("count", "fires"), [(1, False), (2, False), (3, True)])
def test_slurm_controller_or_ha_pair(count, fires):
    text = edit(
        (
            'head: {count: 1, hostname: "head{n:02d}", hardware: cpu, racks: [r1]',
            f'head: {{count: {count}, hostname: "head{{n:02d}}", hardware: cpu, racks: [r1]',
        )
    )
    assert (("error", "controller-count", "$.scheduler.type") in findings(text)) is fires


@pytest.mark.parametrize(("count", "fires"), [(0, True), (1, False), (2, True), (3, False)])
def test_kubernetes_control_plane_must_be_odd(count, fires):
    text = edit(
        ("type: slurm", "type: kubernetes"),
        ("roles: [slurm_controller, ceph_mgr]", "roles: [ceph_mgr]"),
        ("roles: [slurm_compute], pool: gpu", "roles: [k8s_worker], pool: gpu"),
        ("roles: [slurm_compute], pool: cpu", "roles: [k8s_worker], pool: cpu"),
    )
    text = text.replace(
        "  stor: {count: 3,",
        f'  cp: {{count: {count}, hostname: "cp{{n}}", '
        "hardware: cpu, racks: [r1], roles: [k8s_control_plane]}\n"
        "  stor: {count: 3,",
    )
    found = ("error", "control-plane-count", "$.scheduler.type")
    assert (found in findings(text)) is fires


def test_needs_accelerator_accepts_any_accelerator_needs_gpu_only_nvidia():
    tpu = edit(
        (
            "  storage:\n",
            "  tpu: {cpu_cores: 2, memory_gb: 4, accelerators: "
            "{model: tpu, count: 4}}\n  storage:\n",
        ),
        ("hardware: gpu-h100, racks", "hardware: tpu, racks"),
    )
    gpu_need = ("error", "pool-lacks-accelerator", "$.scheduler.workload_classes.training.needs")
    assert gpu_need in findings(tpu)
    accel = tpu.replace(
        "training: {pool: gpu, needs: gpu}", "training: {pool: gpu, needs: accelerator}"
    )
    assert not [f for f in findings(accel) if f[1] == "pool-lacks-accelerator"]


def test_suppressed_warning_keeps_its_reason_and_the_plan_passes():
    # off the network, with no gateway to reach it through: a warning
    text = edit(("gateway: 10.40.0.1, dns: [10.40.0.2]", "dns: [192.0.2.53]"))
    text += (
        "suppress:\n  - code: address-outside\n    path: $.networks.mgmt.dns[0]\n"
        "    reason: the site resolver is routed\n"
    )
    result = validate_text(text, "plan.yml")
    assert result.ok
    (finding,) = result.findings
    assert (finding.code, finding.suppressed_by) == (
        "address-outside",
        "the site resolver is routed",
    )


def test_suppression_for_another_path_does_not_apply():
    # off the network, with no gateway to reach it through: a warning
    text = edit(("gateway: 10.40.0.1, dns: [10.40.0.2]", "dns: [192.0.2.53]"))
    text += (
        "suppress:\n  - code: address-outside\n    path: $.networks.compute.dns[0]\n"
        "    reason: not this one\n"
    )
    assert findings(text) == [
        ("warning", "address-outside", "$.networks.mgmt.dns[0]"),
        ("warning", "unused-suppression", "$.suppress[0]"),
    ]


def test_suppression_needs_a_reason():
    text = BASE + "suppress:\n  - code: oversubscribed\n"
    assert ("error", "missing-key", "$.suppress[0]") in findings(text)


def test_all_findings_are_collected_not_just_the_first():
    text = edit(
        ("gateway: 10.40.0.1,", "gateway: 10.41.0.1,"),
        ("tor2: {uplink: agg1", "tor2: {uplink: agg2"),
        ("failure_domain: host", "failure_domain: rack"),
        ("os: debian-12}", "os: debian-12, timezon: UTC}"),
    )
    codes = {f[1] for f in findings(text)}
    assert {"address-outside", "unknown-reference", "ceph-failure-domains", "unknown-key"} <= codes


def test_many_duplicate_hostnames_make_one_finding_per_pair_of_groups():
    text = edit(
        ('hostname: "cpu{n:02d}"', 'hostname: "gpu{n:02d}"'),
        ("cpu: {count: 1,", "cpu: {count: 500,"),
        ("gpu: {count: 2,", "gpu: {count: 500,"),
        ("10.40.0.0/24", "10.40.0.0/20"),
        ("10.41.0.0/24", "10.41.0.0/20"),
    )
    result = validate_text(text, "plan.yml")
    (finding,) = [f for f in result.findings if f.code == "duplicate-hostname"]
    assert finding.json_path == "$.node_groups.cpu.hostname"
    assert "gpu01" in finding.message
    assert "500" in finding.message  # how many, not each one
    assert "node groups gpu and cpu" in finding.message
