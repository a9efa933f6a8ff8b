"""Mistakes in the newer plan sections that passed validation once: Ceph pools and
hosts, mounts, backup copies, accounts, networks and Kubernetes, at the edges of the checks
that catch them now. The bad-plan corpus (tests/plans/bad) holds one plan per mistake; these
pin down where each check starts firing and where it stays quiet."""

from __future__ import annotations

from pathlib import Path

import pytest
from plan_text import findings, replace_once

from cluster_plan.kubernetes.cluster import refusals
from cluster_plan.plan.allocate import allocate_addresses
from cluster_plan.plan.expand import expand
from cluster_plan.plan.findings import errors
from cluster_plan.plan.validate import validate_text

PLANS = Path(__file__).resolve().parents[1] / "plans"
BASE = (PLANS / "base.yml").read_text()
TEAMS = (PLANS / "base-teams.yml").read_text()
POOL = "      - {name: datasets, size: 3, pg_num: 32, application: rbd}\n"
HEAD_ROLES = "roles: [slurm_controller, ceph_mgr]}"
CEPHFS = (
    "      - {name: fs_meta, size: 2, pg_num: 16, application: cephfs}\n"
    "      - {name: fs_data, size: 2, pg_num: 32, application: cephfs}\n"
    "    cephfs: {metadata_pool: fs_meta, data_pool: fs_data, clients: CLIENTS}\n"
)


def codes(text: str) -> list[tuple[str, str]]:
    return [(severity, code) for severity, code, _ in findings(text)]


def with_cephfs(clients: str) -> str:
    return replace_once(
        BASE,
        (HEAD_ROLES, "roles: [slurm_controller, ceph_mgr, ceph_mds]}"),
        (POOL, POOL + CEPHFS.replace("CLIENTS", clients)),
    )


# -- Ceph ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "found"),
    [
        ('pg_num: 48, autoscale: "off"', [("warning", "ceph-pg-num")]),
        ('pg_num: 64, autoscale: "off"', []),
        ("pg_num: 48, autoscale: warn", []),  # the autoscaler changes it anyway
        ("pg_num: 48", []),  # autoscale: on by default
    ],
)
def test_pg_num_is_a_power_of_two_only_when_it_stays_as_written(settings, found):
    assert codes(replace_once(BASE, ("pg_num: 32", settings))) == found


@pytest.mark.parametrize(("target", "found"), [(4096, []), (4097, [("error", "ceph-osd-memory")])])
def test_osd_memory_fits_the_host_exactly(target, found):
    # the OSD hosts have 4 GB and one OSD disk each
    memory = f"    failure_domain: host\n    memory: {{osd_memory_target_mib: {target}}}\n"
    assert codes(replace_once(BASE, ("    failure_domain: host\n", memory))) == found


def test_osd_memory_counts_every_osd_of_a_host():
    two = replace_once(
        BASE,
        (
            "disks: [{name: osd0, size_gb: 4000, type: hdd, use: osd}]",
            "disks: [{name: osd0, size_gb: 4000, type: hdd, use: osd}, "
            "{name: osd1, size_gb: 4000, type: hdd, use: osd}]",
        ),
    )
    found = [f for f in findings(two) if f[1] == "ceph-osd-memory"]
    assert found == [("error", "ceph-osd-memory", "$.storage.ceph.memory.osd_memory_target_mib")]


def test_monitors_are_on_the_public_network_too():
    text = replace_once(
        BASE,
        ("    failure_domain: host\n", "    failure_domain: host\n    public_network: compute\n"),
        ("roles: [ceph_mon, ceph_osd]}", "roles: [ceph_mon, ceph_osd], networks: [mgmt, compute]}"),
    )
    assert codes(text) == []


def test_cephfs_client_roles():
    assert codes(with_cephfs("[slurm_compute]")) == []
    # the default names every role that may use it; the plan has no login host: fine
    assert codes(with_cephfs("[slurm_compute, login, k8s_worker]")) == []
    found = findings(with_cephfs("[slurm_compute, login]"))
    assert found == [("warning", "cephfs-client-role", "$.storage.ceph.cephfs.clients[1]")]


def test_a_data_pool_of_the_cephfs_may_hold_a_dataset():
    text = replace_once(
        with_cephfs("[slurm_compute]"),
        ("size_gb: 150}", "size_gb: 150, pool: fs_data}"),
        ("fs_data, size: 2", "fs_data, size: 3"),  # three replicas in r1's hosts: not enough
    )
    assert ("error", "ceph-dataset-pool") in codes(text)  # the replica count, as before
    text = text.replace("fs_data, size: 3", "fs_data, size: 2")
    assert codes(text) == []


# -- backups -----------------------------------------------------------------------------------

BACKUPS = 'backups: {schedule: "*-*-* 02:00:00", target: {host: head01, path: /srv/backup}, '


def backups(sources: str) -> str:
    text = replace_once(BASE, (HEAD_ROLES, "roles: [slurm_controller, ceph_mgr, backup_server]}"))
    return text + BACKUPS + f"sources: [{sources}]}}\n"


@pytest.mark.parametrize(
    ("source", "holds"),
    [("/srv", True), ("/srv/backup", True), ("/srv/backup/", True), ("/", True),
     ("/srv/backups", False), ("/etc/slurm", False)],
)  # fmt: skip
def test_a_source_holds_the_repository_only_at_or_above_it(source, holds):
    found = [f for f in findings(backups(source)) if f[1] == "backup-source-repository"]
    assert bool(found) is holds


def test_an_offsite_copy_in_another_rack_is_fine():
    offsite = "offsite: {host: stor02, path: /srv/o}, sources:"
    text = backups("/etc/slurm").replace("sources:", offsite)
    assert [c for c in codes(text) if c[1] == "backup-offsite"] == []


# -- accounts ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uid", "found"),
    [
        ("2002", []),
        ("65534", [("error", "reserved-uid")]),
        ("65535", [("error", "reserved-uid")]),
        ("60000", [("warning", "reserved-uid")]),
        ("65533", [("warning", "reserved-uid")]),
        ("65536", []),
        ("1000", [("warning", "reserved-uid")]),
        ("1001", []),
        ("02002", [("error", "octal-number")]),  # read as 1026
    ],
)
def test_uids(uid, found):
    assert codes(replace_once(TEAMS, ("uid: 2002", f"uid: {uid}"))) == found


def test_a_leading_zero_is_octal_anywhere_and_only_when_plain():
    compute = "compute: {cidr: 10.41.0.0/24, mtu: 9000"
    found = codes(replace_once(BASE, (compute, compute + ", vlan: 010")))
    assert found == [("error", "octal-number")]  # VLAN 8, as YAML reads it
    quoted = codes(replace_once(BASE, (compute, compute + ', vlan: "010"')))
    assert ("error", "octal-number") not in quoted  # text: the schema says it is no number


@pytest.mark.parametrize(("written", "meant"), [("010", "10"), ("-012", "-12"), ("+07", "+7")])
def test_the_octal_hint_keeps_the_sign(written, meant):
    compute = "compute: {cidr: 10.41.0.0/24, mtu: 9000"
    plan = replace_once(BASE, (compute, compute + f", vlan: {written}"))
    (finding,) = [f for f in validate_text(plan, "plan.yml").findings if f.code == "octal-number"]
    assert finding.hint is not None and finding.hint.startswith(f"write {meant} without")


@pytest.mark.parametrize(
    ("team", "kind", "found"),
    [
        ("root", "slurm", [("error", "reserved-team")]),
        ("default", "slurm", []),  # Slurm has no account of that name
        ("kube-system", "kubernetes", [("error", "reserved-team")]),
        ("kube-flow", "kubernetes", [("error", "reserved-team")]),  # kube- is Kubernetes'
        ("default", "kubernetes", [("error", "reserved-team")]),
        ("root", "kubernetes", []),
    ],
)
def test_team_names_the_scheduler_has_already(team, kind, found):
    text = replace_once(TEAMS, ("  nlp:\n", f"  {team}:\n"))
    if kind == "kubernetes":
        text = kubernetes(text).replace("  slurm: {accounting: true}\n", "")
    assert [c for c in codes(text) if c[1] == "reserved-team"] == found


@pytest.mark.parametrize(
    ("access", "found"),
    [
        ("{ansible_user: root}", []),
        ("{ansible_user: bob}", [("error", "ansible-user")]),  # a team user
        ("{ansible_user: ops, admin_users: [{name: ops}]}", [("warning", "ansible-user")]),
        ("{ansible_user: ops, admin_users: [{name: other}]}", []),
        ("{admin_users: [{name: munge}]}", [("error", "reserved-user")]),
    ],
)
def test_accounts_the_plan_makes(access, found):
    assert codes(TEAMS + f"access: {access}\n") == found


# -- networks ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cidr", "bad"),
    [("127.0.0.0/24", True), ("224.1.0.0/24", True), ("0.0.0.0/24", True),
     ("240.0.0.0/24", True), ("126.255.255.0/24", False), ("223.255.255.0/24", False)],
)  # fmt: skip
def test_networks_hosts_cannot_use(cidr, bad):
    found = findings(replace_once(BASE, ("cidr: 10.41.0.0/24", f"cidr: {cidr}")))
    assert (("error", "network-range", "$.networks.compute.cidr") in found) is bad


# -- Kubernetes ----------------------------------------------------------------------------------


def kubernetes(text: str = BASE, settings: str = '{version: "1.36"}') -> str:
    return (
        text.replace("  type: slurm\n", f"  type: kubernetes\n  kubernetes: {settings}\n")
        .replace("roles: [slurm_controller,", "roles: [k8s_control_plane,")
        .replace("roles: [slurm_controller]", "roles: [k8s_control_plane]")
        .replace("roles: [slurm_compute]", "roles: [k8s_worker]")
        .replace("roles: [k8s_control_plane, slurmdbd,", "roles: [k8s_control_plane,")
    )


def test_a_sound_kubernetes_plan_has_no_finding():
    assert codes(kubernetes()) == []


@pytest.mark.parametrize(
    ("settings", "found"),
    [
        ("pod_cidr: 10.244.0.0/22", []),  # 4 /24s for 4 nodes
        ("pod_cidr: 10.244.0.0/23", ["pod-cidr-size"]),
        ("pod_cidr: 10.244.0.0/24", ["pod-cidr-size"]),  # no room for a node range at all
        ("service_cidr: 10.96.0.0/28", []),
        ("service_cidr: 10.96.0.0/29", ["service-cidr-size"]),  # no 10th address
        ("service_cidr: 10.96.0.0/11", ["service-cidr-size"]),  # kube-apiserver's limit
        ("encapsulation: vxlan", []),  # a 1500-byte management network leaves 1450
    ],
)
def test_kubernetes_network_sizes(settings, found):
    text = kubernetes(settings='{version: "1.36", ' + settings + "}")
    assert [code for _, code in codes(text)] == found


def test_pods_need_1280_bytes_under_the_encapsulation():
    text = kubernetes(settings='{version: "1.36", encapsulation: vxlan}')
    text = replace_once(text, ("cidr: 10.40.0.0/24,", "cidr: 10.40.0.0/24, mtu: 1300,"))
    assert codes(text) == [("error", "pod-mtu")]


L4_FOR_TRAINING = [("warning", "training-gpu-memory"), ("warning", "training-without-nvlink")]


@pytest.mark.parametrize(
    ("model", "mode", "found"),
    [
        ("H100-PCIE-80GB", "mig", []),
        # and two fitness warnings of their own: the plan trains on 24 GB PCIe L4s
        ("L4", "mig", [("error", "mig-unsupported"), *L4_FOR_TRAINING]),
        ("L4", "time-slicing, replicas: 2", L4_FOR_TRAINING),
    ],
)
def test_mig_needs_gpus_that_have_it(model, mode, found):
    text = kubernetes(settings=f'{{version: "1.36", gpu_sharing: {{mode: {mode}}}}}')
    text = replace_once(text, ("model: H100-PCIE-80GB", f"model: {model}"))
    assert codes(text) == found


# the Kubernetes plans of the bad corpus (k8s-roles-under-slurm.yml is a Slurm plan)
K8S_BAD = [
    p for p in sorted((PLANS / "bad").glob("k8s-*.yml")) if "type: kubernetes" in p.read_text()
]


@pytest.mark.parametrize("plan", K8S_BAD, ids=lambda p: p.stem)
def test_validate_finds_everything_render_refuses(plan):
    """The renderer's refusals on the expanded plan are all errors of validate (its rules are
    the renderer's own, run on the plan): `k8s render` never refuses a plan validate passed."""
    result = validate_text(plan.read_text(), str(plan))
    assert result.plan["scheduler"]["type"] == "kubernetes"
    lock, _ = allocate_addresses(result.plan, result.nodes, None)
    refused = {(f.code, f.json_path) for f in refusals(expand(result.plan, result.nodes, lock))}
    found = {(f.code, f.json_path) for f in errors(result.findings)}
    counted = {f.code for f in errors(result.findings)} & {"control-plane-count"}
    assert {r for r in refused if r[0] not in counted} <= found


# -- Slurm HA: the hint points at a mount both controllers have -------------------------------

NFS = (
    "  nfs: {{server: {server}, "
    "exports: [{{path: /srv/slurm, network: mgmt, mount: /var/spool/x}}]}}\n"
)


@pytest.mark.parametrize(
    ("server", "hint"),
    [
        ("cpu01", "put state_save under a mount both controllers have (/var/spool/x)"),
        ("head01", "/var/spool/x: not on head01; head01 is its NFS server, which does not mount"),
    ],
)
def test_the_ha_hint_never_points_at_a_mount_a_controller_lacks(server, hint):
    text = replace_once(
        BASE,
        ('head: {count: 1, hostname: "head{n:02d}", hardware: cpu, racks: [r1], ',
         'head: {count: 2, hostname: "head{n:02d}", hardware: cpu, racks: [r1, r2], '),
        (HEAD_ROLES, "roles: [slurm_controller, ceph_mgr, nfs_server]}"),
        ("roles: [slurm_compute], pool: cpu}", "roles: [slurm_compute, nfs_server], pool: cpu}"),
        ("\nstorage:\n", "\nstorage:\n" + NFS.format(server=server)),
    )  # fmt: skip
    result = validate_text(text, "plan.yml")
    (finding,) = [f for f in result.findings if f.code == "ha-state-not-shared"]
    assert finding.json_path == "$.scheduler.slurm.state_save"
    assert hint in (finding.hint or "")
    if server == "head01":
        assert "a mount both controllers have" not in (finding.hint or "")
