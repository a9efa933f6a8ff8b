"""Mistakes that passed validation once, at the edges of the checks that catch them
now: where each check starts firing, where it must stay quiet, and what its hint says. The
bad-plan corpus (tests/plans/bad) holds one plan per mistake; these pin down the boundaries."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from plan_text import replace_once

from cluster_plan.plan.allocate import allocate_addresses
from cluster_plan.plan.checks import cluster as cluster_checks
from cluster_plan.plan.checks.reservations import NOW_VARIABLE, plan_now
from cluster_plan.plan.expand import expand
from cluster_plan.plan.validate import validate_text

BASE = (Path(__file__).resolve().parents[1] / "plans" / "base.yml").read_text()
GPU_HW = "  gpu-h100: {cpu_cores: 2, memory_gb: 8, accelerators: {model: H100-PCIE-80GB, count: 2}}"
GPU_GROUP = (
    '  gpu: {count: 2, hostname: "gpu{n:02d}", hardware: gpu-h100, racks: [r1, r2], '
    "roles: [slurm_compute], pool: gpu}"
)
CPU_GROUP = (
    '  cpu: {count: 1, hostname: "cpu{n:02d}", hardware: cpu, racks: [r2], '
    "roles: [slurm_compute], pool: cpu}"
)
HEAD_GROUP = (
    '  head: {count: 1, hostname: "head{n:02d}", hardware: cpu, racks: [r1], '
    "roles: [slurm_controller, ceph_mgr]}"
)
MGMT = (
    "  mgmt: {cidr: 10.40.0.0/24, gateway: 10.40.0.1, dns: [10.40.0.2], "
    "reserved: [10.40.0.1-10.40.0.9]}"
)
COMPUTE = "  compute: {cidr: 10.41.0.0/24, mtu: 9000}"
RESERVATION = '    maint: {start: "2027-01-05T02:00:00", duration_minutes: 120, node_groups: [gpu]}'


def report(text: str) -> list[tuple[str, str, str, str]]:
    result = validate_text(text, "plan.yml")
    return [
        (f.severity, f.code, f.json_path, f.hint or "")
        for f in result.findings
        if f.suppressed_by is None
    ]


def codes(text: str) -> list[str]:
    return [code for _, code, _, _ in report(text)]


def edit(*pairs: tuple[str, str], text: str = BASE) -> str:
    return replace_once(text, *pairs)


def with_nics(nics: str, text: str = BASE) -> str:
    return edit((GPU_HW, GPU_HW[:-1] + f", nics: {nics}}}"), text=text)


def test_base_is_clean():
    assert report(BASE) == []


# -- x- keys: a home for YAML anchors ---------------------------------------------------------


ANCHORED = edit(
    ("hardware:\n  cpu: {cpu_cores: 2, memory_gb: 4,", "hardware:\n  cpu: {<<: *small,"),
    (
        "plugin: cluster_plan\n",
        "plugin: cluster_plan\nx-small: &small {cpu_cores: 2, memory_gb: 4}\n",
    ),
)


def test_x_keys_hold_anchors_and_are_not_part_of_the_plan():
    assert report(ANCHORED) == []
    result = validate_text(ANCHORED, "plan.yml")
    assert "x-small" not in result.plan
    assert result.plan["hardware"]["cpu"]["cpu_cores"] == 2
    lock, problems = allocate_addresses(result.plan, result.nodes)
    assert problems == []
    expanded = expand(result.plan, result.nodes, lock)
    assert not [key for key in expanded if key.startswith("x-")]
    assert expanded["hosts"]["head01"]["cpu_cores"] == 2


def test_x_keys_are_only_a_top_level_convention():
    text = edit(("os: debian-12}", "os: debian-12, x-note: 1}"))
    assert [f[:3] for f in report(text)] == [("error", "unknown-key", "$.cluster['x-note']")]


@pytest.mark.parametrize(
    ("key", "hint"),
    [
        ("compute", "allowed keys: plugin"),  # not "did you mean 'compose'?"
        ("extras", "allowed keys: plugin"),  # not "did you mean 'use_extra_vars'?"
        ("grups", "did you mean 'groups'?"),  # a near miss of Ansible's own option
        ("composer", "did you mean 'compose'?"),
        ("acceptence", "did you mean 'acceptance'?"),
        ("x_defaults", "`x-` keys"),
    ],
)
def test_unknown_top_level_key_hints(key, hint):
    (finding,) = report(BASE + f"{key}: {{}}\n")
    assert finding[1] == "unknown-key"
    assert finding[3].startswith(hint) or hint in finding[3]


# -- time zone --------------------------------------------------------------------------------


@pytest.mark.parametrize("zone", ["UTC", "Etc/UTC", "Europe/Berlin", "America/Argentina/Salta"])
def test_iana_time_zones_pass(zone):
    assert report(edit(("os: debian-12}", f"os: debian-12, timezone: {zone}}}"))) == []


@pytest.mark.parametrize(
    ("zone", "hint"),
    [
        ("utc", "did you mean 'UTC'?"),
        ("Europe/Berln", "did you mean 'Europe/Berlin'?"),
        ("CEST", "CEST is an abbreviation"),
        ("+02:00", "use an IANA name"),
    ],
)
def test_other_time_zones_fail(zone, hint):
    (finding,) = report(edit(("os: debian-12}", f'os: debian-12, timezone: "{zone}"}}')))
    assert finding[:3] == ("error", "unknown-timezone", "$.cluster.timezone")
    assert hint in finding[3]


def test_without_a_time_zone_database_nothing_is_judged(monkeypatch):
    monkeypatch.setattr(cluster_checks, "iana_timezones", frozenset)
    assert report(edit(("os: debian-12}", "os: debian-12, timezone: Mars/Olympus}"))) == []


# -- reservations against "now" ---------------------------------------------------------------


def reservation(start: str, minutes: int = 60, flags: str = "", zone: str = "") -> str:
    text = edit(
        (
            RESERVATION,
            f'    maint: {{start: "{start}", duration_minutes: {minutes}, node_groups: [gpu]'
            + (f", flags: [{flags}]" if flags else "")
            + "}",
        )
    )
    if zone:
        text = edit(("os: debian-12}", f"os: debian-12, timezone: {zone}}}"), text=text)
    return text


@pytest.mark.parametrize(
    ("start", "minutes", "past"),
    [
        ("2026-05-31T23:00:00", 60, True),  # ends exactly now
        ("2026-05-31T23:00:00", 61, False),  # ends a minute from now
        ("2026-05-31T23:30:00", 60, False),  # under way
        ("2020-01-01T00:00:00", 1, True),
        ("2030-01-01T00:00:00", 1, False),
    ],
)
def test_reservation_that_ended(monkeypatch, start, minutes, past):
    monkeypatch.setenv(NOW_VARIABLE, "2026-06-01T00:00:00+00:00")
    found = report(reservation(start, minutes))
    assert (found == [("warning", "reservation-past", "$.scheduler.reservations.maint.start",
                       "move it to a coming window, or remove it")]) is past  # fmt: skip
    assert found == [] or past


def test_recurring_reservations_never_end(monkeypatch):
    monkeypatch.setenv(NOW_VARIABLE, "2026-06-01T00:00:00+00:00")
    assert report(reservation("2020-01-01T02:00:00", flags="maint, weekly")) == []
    assert report(reservation("2020-01-01T02:00:00", flags="daily")) == []
    assert codes(reservation("2020-01-01T02:00:00", flags="maint")) == ["reservation-past"]


def test_reservation_times_are_in_the_cluster_time_zone(monkeypatch):
    # 10:00-11:00 on New Year's Day is 21:00-22:00 UTC the day before in Auckland (UTC+13)
    monkeypatch.setenv(NOW_VARIABLE, "2026-01-01T00:00:00+00:00")
    assert codes(reservation("2026-01-01T10:00:00", zone="Pacific/Auckland")) == [
        "reservation-past"
    ]
    assert codes(reservation("2026-01-01T10:00:00", zone="UTC")) == []
    assert codes(reservation("2026-01-01T10:00:00+00:00", zone="Pacific/Auckland")) == []


def test_now_is_the_clock_unless_fixed(monkeypatch):
    monkeypatch.delenv(NOW_VARIABLE, raising=False)
    before = datetime.now(UTC)
    now, problem = plan_now()
    assert problem is None and before <= now <= datetime.now(UTC)
    monkeypatch.setenv(NOW_VARIABLE, "2026-06-01T12:00:00")  # naive: UTC
    assert plan_now() == (datetime(2026, 6, 1, 12, tzinfo=UTC), None)
    monkeypatch.setenv(NOW_VARIABLE, "next tuesday")
    now, problem = plan_now()
    assert problem is not None and problem.code == "environment"
    assert before <= now


# -- the scheduler's own settings -------------------------------------------------------------


def kubernetes(text: str = BASE) -> str:
    return edit(
        ("  type: slurm\n", '  type: kubernetes\n  kubernetes: {version: "1.36"}\n'),
        ("roles: [slurm_controller, ceph_mgr]", "roles: [k8s_control_plane, ceph_mgr]"),
        (GPU_GROUP, GPU_GROUP.replace("slurm_compute", "k8s_worker")),
        (CPU_GROUP, CPU_GROUP.replace("slurm_compute", "k8s_worker")),
        text=text,
    )


def test_settings_of_the_other_scheduler():
    assert codes(kubernetes()) == []  # reservations: a taint for the window (roles/kubernetes)
    k8s = kubernetes(edit(("  reservations:\n" + RESERVATION + "\n", "")))
    assert report(k8s) == []
    found = report(edit(("  type: kubernetes\n", "  type: kubernetes\n  slurm: {}\n"), text=k8s))
    assert [f[:3] for f in found] == [("error", "scheduler-settings-mismatch", "$.scheduler.slurm")]
    found = report(edit(("  type: slurm\n", "  type: slurm\n  kubernetes: {}\n")))
    assert [f[:3] for f in found] == [
        ("error", "scheduler-settings-mismatch", "$.scheduler.kubernetes")
    ]


# -- controller counts: the hint says what to do ------------------------------------------------


@pytest.mark.parametrize(
    ("head", "hint"),
    [
        ("count: 3", "group head has the role on its 3 node(s): make its count 1 or 2"),
        ("count: 0", "give one node group of 1 or 2 node(s) the role slurm_controller"),
    ],
)
def test_controller_count_hints(head, hint):
    text = edit((HEAD_GROUP, HEAD_GROUP.replace("count: 1", head)))
    found = [f for f in report(text) if f[1] == "controller-count"]
    assert found and hint in found[0][3]


def test_no_controller_count_when_the_controllers_could_not_be_counted():
    text = edit((HEAD_GROUP, HEAD_GROUP.replace('"head{n:02d}"', '"head{m}"')))
    assert codes(text) == ["hostname-pattern"]


# -- pools ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("classes", "cpu_pool", "hint"),
    [
        # a missing CPU pool is not the GPU pool one letter away
        ("general: {pool: cpu, needs: cpu, default: true}", "", "no pool of CPU-only nodes"),
        ("general: {pool: cpu, default: true}", "", "no pool of CPU-only nodes"),
        ("general: {pool: cpus, needs: cpu, default: true}", ", pool: cpu", "did you mean 'cpu'?"),
        ("general: {pool: gpus, needs: gpu, default: true}", ", pool: cpu", "did you mean 'gpu'?"),
        ("general: {pool: cpux, needs: any, default: true}", ", pool: cpu", "did you mean 'cpu'?"),
    ],
)
def test_pool_hints_keep_to_the_kind_of_pool(classes, cpu_pool, hint):
    text = edit(
        ("    general: {pool: cpu, needs: cpu, default: true}", f"    {classes}"),
        (CPU_GROUP, CPU_GROUP.replace(", pool: cpu}", cpu_pool + "}")),
    )
    found = [f for f in report(text) if f[1] == "unknown-reference"]
    assert found and hint in found[0][3], found


def test_an_empty_pool_is_still_reported_when_nothing_else_explains_it():
    text = edit((CPU_GROUP, CPU_GROUP.replace("count: 1", "count: 0")))
    assert codes(text) == ["empty-pool"]


@pytest.mark.parametrize(
    ("change", "found"),
    [
        ("roles: []", ["pool-not-schedulable"]),
        ("roles: [slurm_compute, login]", []),
        ("roles: [login]", ["pool-not-schedulable"]),
        ("roles: [k8s_worker]", ["role-scheduler-mismatch"]),  # not also a second finding
    ],
)
def test_pool_nodes_run_the_scheduler(change, found):
    assert codes(edit((CPU_GROUP, CPU_GROUP.replace("roles: [slurm_compute]", change)))) == found


def test_a_pool_no_class_routes_to_needs_no_compute_role():
    text = edit((HEAD_GROUP, HEAD_GROUP.replace("ceph_mgr]", "ceph_mgr], pool: infra")))
    assert report(text) == []


# -- datasets ---------------------------------------------------------------------------------


def test_dataset_beside_a_pool_node_of_any_routed_class():
    # r2 holds gpu02 and cpu01
    assert report(edit(("imagenet: {racks: [r1]", "imagenet: {racks: [r2]"))) == []
    # only the CPU group stands in r2; that pool is routed to, which is enough
    text = edit(
        ("imagenet: {racks: [r1]", "imagenet: {racks: [r2]"),
        (GPU_GROUP, GPU_GROUP.replace("racks: [r1, r2]", "racks: [r1]")),
    )
    assert report(text) == []


def test_dataset_without_workload_classes_looks_at_compute_nodes():
    text = edit(
        (
            "  workload_classes:\n    training: {pool: gpu, needs: gpu}\n"
            "    general: {pool: cpu, needs: cpu, default: true}\n",
            "",
        ),
    )
    assert report(text) == []
    moved = edit((GPU_GROUP, GPU_GROUP.replace("racks: [r1, r2]", "racks: [r2]")), text=text)
    assert codes(moved) == ["dataset-unreachable"]


def test_no_dataset_warning_when_its_pool_nodes_stand_in_unknown_racks():
    text = edit((GPU_GROUP, GPU_GROUP.replace("racks: [r1, r2]", "racks: [r3]")))
    assert codes(text) == ["unknown-reference"]


# -- NICs, VLANs, MTUs ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nics", "networks", "found"),
    [
        ("[{name: ens1, networks: [mgmt, compute]}]", (MGMT, COMPUTE), ["nic-mtu-conflict"]),
        # one MTU for both: one device can carry them
        ("[{name: ens1, networks: [mgmt, compute]}]", (MGMT, COMPUTE.replace("9000", "1500")), []),
        ("[{name: ens1, networks: [mgmt]}, {name: ens2, networks: [compute]}]", (MGMT, COMPUTE),
         []),
        # a tagged jumbo network over an untagged 9000 NIC, or a smaller VLAN MTU: fine
        ("[{name: ens1, networks: [mgmt, compute]}]",
         (MGMT[:-1] + ", mtu: 9000}", COMPUTE[:-1] + ", vlan: 41}"), []),
        ("[{name: ens1, networks: [mgmt, compute]}]",
         (MGMT[:-1] + ", mtu: 9000}", COMPUTE.replace("9000", "1500")[:-1] + ", vlan: 41}"), []),
        # tagged over an untagged 1500 NIC: the VLAN device cannot be 9000
        ("[{name: ens1, networks: [mgmt, compute]}]", (MGMT, COMPUTE[:-1] + ", vlan: 41}"),
         ["nic-mtu-conflict"]),
        # both tagged, each with its own VLAN: each VLAN device has its own MTU
        ("[{name: ens1, networks: [mgmt, compute]}]",
         (MGMT[:-1] + ", vlan: 40, mtu: 9000}", COMPUTE[:-1] + ", vlan: 41}"), []),
    ],
)  # fmt: skip
def test_networks_sharing_a_nic(nics, networks, found):
    text = edit((MGMT, networks[0]), (COMPUTE, networks[1]))
    assert codes(with_nics(nics, text)) == found


def test_profiles_without_nics_keep_one_device_per_network():
    # no nics listed: the device of each network is named after it, and no MTU is shared
    assert report(edit((COMPUTE, COMPUTE.replace("9000", "1500")))) == []


def test_network_without_nic_points_where_the_network_was_chosen():
    storage = "  storage: {cidr: 10.42.0.0/24}\n"
    three = edit((COMPUTE + "\n", COMPUTE + "\n" + storage))
    nics = "[{name: eno1, networks: [mgmt]}, {name: ens1, networks: [compute]}]"
    # on every network (the default): the profile's nics lack one
    found = report(with_nics(nics, three))
    assert [f[:3] for f in found] == [
        ("error", "network-without-nic", "$.hardware['gpu-h100'].nics")
    ]
    assert "or give group gpu a networks list without it" in found[0][3]
    # the group chose storage: that is where it points
    listed = edit((GPU_GROUP, GPU_GROUP[:-1] + ", networks: [mgmt, storage]}"), text=three)
    assert [f[:3] for f in report(with_nics(nics, listed))] == [
        ("error", "network-without-nic", "$.node_groups.gpu.networks[1]")
    ]


def test_a_group_on_fewer_networks_needs_fewer_nics():
    text = with_nics(
        "[{name: eno1, networks: [mgmt]}]",
        edit((GPU_GROUP, GPU_GROUP[:-1] + ", networks: [mgmt]}")),
    )
    assert codes(text) == []


def test_vlan_ids_once_per_network():
    text = edit((MGMT, MGMT[:-1] + ", vlan: 40}"), (COMPUTE, COMPUTE[:-1] + ", vlan: 41}"))
    assert report(text) == []
    text = edit((MGMT, MGMT[:-1] + ", vlan: 40}"), (COMPUTE, COMPUTE[:-1] + ", vlan: 40}"))
    assert [f[:3] for f in report(text)] == [
        ("warning", "duplicate-vlan", "$.networks.compute.vlan")
    ]


# -- ports, disks -----------------------------------------------------------------------------


@pytest.mark.parametrize(("ports", "found"), [(4, []), (3, ["switch-ports"]), (48, [])])
def test_access_switch_ports(ports, found):
    # rack r1 holds head01, gpu01, stor01 and stor03
    tor1 = "tor1: {uplink: agg1, racks: [r1], link_gbps: 10, uplink_gbps: 40}"
    assert codes(edit((tor1, tor1[:-1] + f", ports: {ports}}}"))) == found


def test_disk_names_are_per_profile_and_per_host():
    storage = "disks: [{name: osd0, size_gb: 4000, type: hdd, use: osd}]"
    # another profile may reuse a name; a node's extra disk may not repeat its profile's
    assert report(edit((storage, storage.replace("osd0", "os")))) == []
    stor = '  stor: {count: 3, hostname: "stor{n:02d}"'
    extra = "nodes: {stor02: {disks: [{name: osd1, size_gb: 8000, type: hdd, use: osd}]}}"
    text = edit(
        (stor, stor),
        ("roles: [ceph_mon, ceph_osd]}", f"roles: [ceph_mon, ceph_osd], {extra}}}"),
        ("    memory_gb: 4\n    disks", "    memory_gb: 16\n    disks"),  # two OSDs' memory
    )
    assert report(text) == []
    assert codes(text.replace("name: osd1", "name: osd0")) == ["duplicate-disk"]


# -- services ---------------------------------------------------------------------------------


BACKUPS = 'backups: {schedule: "daily", target: {host: head01, path: /srv/backup}}\n'


def test_backup_target():
    server = edit((HEAD_GROUP, HEAD_GROUP.replace("ceph_mgr]", "ceph_mgr, backup_server]")))
    assert codes(server + BACKUPS) == ["no-backup-disk"]
    disk = "nodes: {head01: {disks: [{name: backup, size_gb: 8000, type: hdd, use: backup}]}}"
    with_disk = edit(("backup_server]}", f"backup_server], {disk}}}"), text=server)
    assert report(with_disk + BACKUPS) == []
    assert codes(with_disk.replace(", backup_server]", "]") + BACKUPS) == ["missing-role"]
    unknown = with_disk + BACKUPS.replace("host: head01", "host: head99")
    assert codes(unknown) == ["unknown-reference"]  # not also missing-role


def test_nfs_server():
    nfs = "\nstorage:\n  nfs: {server: head01, exports: [{path: /home, network: mgmt}]}\n"
    role = (HEAD_GROUP, HEAD_GROUP.replace("ceph_mgr]", "ceph_mgr, nfs_server]"))
    assert report(edit(role, ("\nstorage:\n", nfs))) == []
    assert codes(edit(("\nstorage:\n", nfs))) == ["nfs-server-role"]
    assert codes(edit(role)) == ["nothing-to-serve"]


# -- the package proxy ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "found"),
    [
        ("http://10.40.0.2:3142", []),  # the DNS server's address: never handed out
        ("http://10.40.0.5:3142", []),  # inside reserved
        ("http://10.40.0.50:3142", ["address-not-reserved"]),
        ("http://proxy.example.org:3128", []),  # a name: nothing to reserve
        ("http://192.168.1.1:3128", []),  # outside every plan network
    ],
)
def test_package_proxy_address(url, found):
    assert codes(BASE + f"packages: {{proxy: {url}}}\n") == found


# -- acceptance thresholds --------------------------------------------------------------------


@pytest.mark.parametrize(("loss", "found"), [(0, []), (0.001, []), (-0.1, ["range"])])
def test_a_loss_threshold_of_zero_is_a_plan_acceptance_can_run(loss, found):
    # the acceptance side (a bounded probe count, no traceback) is in tests/acceptance
    acceptance = "  network: {networks: [compute], min_gbps: 9}"
    text = edit((acceptance, acceptance[:-1] + f", max_latency_ms: 0.5, max_loss_pct: {loss}}}"))
    assert codes(text) == found


# -- false positives --------------------------------------------------------------------------


def test_dns_off_the_network_is_reached_through_its_gateway():
    mgmt_dns = edit((MGMT, MGMT.replace("dns: [10.40.0.2]", "dns: [192.0.2.53]")))
    assert report(mgmt_dns) == []  # mgmt has a gateway
    no_gateway = edit(("gateway: 10.40.0.1, ", ""), text=mgmt_dns)
    assert [f[:3] for f in report(no_gateway)] == [
        ("warning", "address-outside", "$.networks.mgmt.dns[0]")
    ]


# -- reservations Slurm can create ------------------------------------------------------------


def two_windows(second: str) -> str:
    return edit((RESERVATION, RESERVATION + "\n    " + second))


@pytest.mark.parametrize(
    ("second", "found"),
    [
        # the same nodes an hour into the two-hour window
        ('demo: {start: "2027-01-05T03:00:00", duration_minutes: 60, nodes: [gpu01]}',
         ["reservation-overlap"]),
        # back to back: 04:00 is when maint ends
        ('demo: {start: "2027-01-05T04:00:00", duration_minutes: 60, nodes: [gpu01]}', []),
        # other nodes at the same time
        ('demo: {start: "2027-01-05T03:00:00", duration_minutes: 60, nodes: [cpu01]}', []),
        # allowed to share
        ('demo: {start: "2027-01-05T03:00:00", duration_minutes: 60, nodes: [gpu01], '
         "flags: [overlap]}", []),
        ('demo: {start: "2027-01-05T03:00:00", duration_minutes: 60, nodes: [gpu01], '
         "flags: [maint]}", []),
        # the same instant written in another time zone (the cluster's is UTC)
        ('demo: {start: "2027-01-05T04:30:00+01:00", duration_minutes: 60, '
         "node_groups: [gpu]}", ["reservation-overlap"]),
    ],
)  # fmt: skip
def test_overlapping_reservations(second, found):
    assert codes(two_windows(second)) == found


def test_reservations_hold_compute_nodes():
    assert codes(edit(("node_groups: [gpu]}", "node_groups: [gpu, stor]}"))) == [
        "reservation-not-compute"
    ]
    assert report(edit(("node_groups: [gpu]}", "node_groups: [gpu, cpu]}"))) == []


@pytest.mark.parametrize(
    ("limit", "ok"),
    [("7-00:00:00", True), ("48:00:00", True), ("90", True), ("1-12", True),
     ("unlimited", True), ("7d", False), ("168h", False), ("1 week", False)],
)  # fmt: skip
def test_class_time_limits(limit, ok):
    training = "training: {pool: gpu, needs: gpu}"
    text = edit((training, training[:-1] + f', max_time: "{limit}"}}'))
    assert codes(text) == ([] if ok else ["time-format"])


def test_the_server_role_on_the_chosen_group_is_fine():
    # roles are per group: the target's group mates carry backup_server too, and that is fine
    head = HEAD_GROUP.replace("count: 1", "count: 2").replace(
        "ceph_mgr]}", "ceph_mgr, backup_server]"
    )
    disk = "nodes: {head02: {disks: [{name: backup, size_gb: 8000, type: hdd, use: backup}]}}"
    text = edit((HEAD_GROUP, head + f", {disk}}}"), text=BASE + BACKUPS.replace("head01", "head02"))
    # two heads are also an HA pair of controllers: where they keep state is not this test's
    assert [f for f in report(text) if f[1] != "ha-state-not-shared"] == []


HA_HEADS = HEAD_GROUP.replace("count: 1", "count: 2")
CPU_ROLES = "roles: [slurm_compute], pool: cpu}"
NFS = """
  nfs:
    server: {server}
    exports:
      - {{path: /srv/slurm, network: {network}, mount: /var/spool/slurmctld}}
"""


@pytest.mark.parametrize(
    ("server", "network", "expected"),
    [
        ("cpu01", "mgmt", []),  # both controllers mount the export
        ("head01", "mgmt", ["$.storage.nfs.exports[0].network"]),  # the server does not mount it
    ],
)
def test_an_ha_pair_keeps_its_state_on_an_nfs_export_both_controllers_mount(
    server, network, expected
):
    text = edit(
        (HEAD_GROUP, HA_HEADS.replace("ceph_mgr]", "ceph_mgr, nfs_server]")),
        (CPU_ROLES, "roles: [slurm_compute, nfs_server], pool: cpu}"),
        ("  type: slurm\n", "  type: slurm\n  slurm: {state_save: /var/spool/slurmctld/state}\n"),
        ("\nstorage:\n", "\nstorage:" + NFS.format(server=server, network=network)),
    )
    found = report(text)
    assert [f[2] for f in found if f[1] == "ha-state-not-shared"] == expected
    # shared or not, nothing fences a lost primary from NFS: a warning the plan may suppress
    assert [f[:3] for f in found if f[1] == "ha-state-unfenced"] == [
        ("warning", "ha-state-unfenced", "$.scheduler.slurm.state_save")
    ]
