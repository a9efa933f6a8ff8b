"""Every default of the plan, in one table, applied in one place.

`with_defaults(plan)` fills each setting the plan leaves out, so the checks, the expansion and
every consumer behind it (roles through the inventory, the lab, acceptance, diff, audit) read
one value and never choose a default of their own. The schema's `default` annotations are
tested to agree with this table; docs/expanded-data.md lists the result.

Paths are dotted: `*` stands for every key of a mapping, `[]` for every item of a list. A
default applies only where its parent exists, so `hardware.*.accelerators.driver_branch` is
filled in profiles that have accelerators. A section whose default is None stays absent from
the plan but present (as null) in the expanded data.

Defaults that depend on the rest of the plan (the management network, the networks acceptance
tests, Ceph's networks, Slurm's cluster name, the networks of a node group, the workload
classes of a team) are `DERIVED` below, and sections that exist because of another setting
(Slurm's, in a Slurm plan) are `SECTIONS`; both are applied here too.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

from cluster_plan.plan.catalog import nvswitch_default
from cluster_plan.plan.oncalendar import longest_gap_hours
from cluster_plan.plan.power import AIR_COOLING_MAX_KW, TYPICAL_LOAD_PCT, WARN_UTILIZATION_PCT
from cluster_plan.plan.roles import CEPHFS_CLIENT_ROLES

# XIDs that take a GPU out of service (NVIDIA XID catalog): double-bit ECC, internal
# micro-controller halt, row remap failure, NVLink error, fallen off the bus, high single-bit
# ECC rate, uncontained ECC, GSP errors, unrecovered ECC. Others warn.
FATAL_XIDS = [48, 62, 64, 74, 79, 92, 95, 119, 120, 140]

PLAN_DEFAULTS: dict[str, Any] = {
    "cluster.os": None,
    "cluster.timezone": "UTC",
    "cluster.description": "",
    "cluster.time_reference.stratum": 10,
    "networks.*.gateway": None,
    "networks.*.dns": [],
    "networks.*.ntp": [],
    "networks.*.mtu": 1500,
    "networks.*.vlan": None,
    "networks.*.reserved": [],
    "networks.*.description": "",
    "racks.*.row": None,
    "racks.*.description": "",
    "power": {},
    "power.typical_load_pct": TYPICAL_LOAD_PCT,
    "power.warn_utilization_pct": WARN_UTILIZATION_PCT,
    "power.air_cooling_max_kw": AIR_COOLING_MAX_KW,
    "topology.aggregation.*.uplink_gbps": None,
    "topology.access.*.uplink_gbps": None,
    "topology.access.*.ports": None,
    "hardware.*.disks": [],
    "hardware.*.disks.[].type": "ssd",
    "hardware.*.disks.[].use": "data",
    "hardware.*.nics": [],
    "hardware.*.accelerators": None,
    "hardware.*.accelerators.driver_branch": None,
    "hardware.*.description": "",
    "node_groups.*.start": 1,
    "node_groups.*.roles": [],
    "node_groups.*.pool": None,
    "node_groups.*.nodes": {},
    "node_groups.*.nodes.*.disks.[].type": "ssd",
    "node_groups.*.nodes.*.disks.[].use": "data",
    "node_groups.*.description": "",
    "scheduler": None,
    # scheduler.slurm exists in Slurm plans (see _scheduler_sections), and only there
    "scheduler.slurm.accounting": False,
    "scheduler.slurm.gres_autodetect": False,
    "scheduler.slurm.usage_period": "monthly",
    "scheduler.slurm.fairshare_half_life_days": 7,
    "scheduler.slurm.state_save": "/var/lib/slurm/slurmctld",
    # Slurm's own defaults; a lab or a small cluster may want a faster takeover or detection
    "scheduler.slurm.controller_timeout_s": 120,
    "scheduler.slurm.node_timeout_s": 300,
    "scheduler.slurm.message_timeout_s": 10,
    # scheduler.kubernetes exists in Kubernetes plans (see _scheduler_sections), and only there
    "scheduler.kubernetes.pod_cidr": "10.244.0.0/16",
    "scheduler.kubernetes.service_cidr": "10.96.0.0/12",
    "scheduler.kubernetes.container_runtime": "containerd",
    "scheduler.kubernetes.api_vip": None,
    "scheduler.kubernetes.encapsulation": "ipip",
    "scheduler.kubernetes.gpu_sharing": {},
    "scheduler.kubernetes.gpu_sharing.mode": "none",
    "scheduler.kubernetes.gpu_sharing.mig_strategy": "single",
    "scheduler.kubernetes.training_image": None,
    "scheduler.kubernetes.cni": "calico",
    "scheduler.kubernetes.mirror": None,
    "scheduler.kubernetes.mirror.registry_port": 5000,
    "scheduler.kubernetes.mirror.files_port": 8080,
    "scheduler.workload_classes": {},
    "scheduler.workload_classes.*.needs": "any",
    "scheduler.workload_classes.*.default": False,
    "scheduler.workload_classes.*.max_time": "UNLIMITED",
    "scheduler.workload_classes.*.description": "",
    "scheduler.datasets": {},
    "scheduler.datasets.*.description": "",
    "scheduler.datasets.*.pool": None,
    "scheduler.reservations": {},
    "scheduler.reservations.*.node_groups": [],
    "scheduler.reservations.*.nodes": [],
    "scheduler.reservations.*.flags": [],
    "scheduler.reservations.*.users": [],
    "scheduler.reservations.*.accounts": [],
    # teams.*.classes is derived: every workload class
    "teams": {},
    "teams.*.description": "",
    "teams.*.parent": None,
    "teams.*.fairshare": 1,
    "teams.*.limits": {},
    "teams.*.limits.gpus": None,
    "teams.*.limits.accelerators": None,
    "teams.*.limits.gpu_hours": None,
    "teams.*.limits.max_time": None,
    "teams.*.users": [],
    "teams.*.users.[].ssh_keys": [],
    "storage": {},
    "storage.local": {},
    "storage.local.scratch": "/scratch",
    "storage.nfs": None,
    "storage.nfs.exports": [],
    "storage.nfs.exports.[].backend": "vfs",
    "storage.ceph": None,
    "storage.ceph.release": "pacific",
    "storage.ceph.failure_domain": "host",
    "storage.ceph.memory": {},
    "storage.ceph.memory.osd_memory_target_mib": 4096,
    "storage.ceph.memory.mon_memory_target_mib": 2048,
    "storage.ceph.memory.mds_cache_mib": 4096,
    "storage.ceph.pools": [],
    "storage.ceph.pools.[].pg_num": 32,
    "storage.ceph.pools.[].autoscale": "on",
    "storage.ceph.pools.[].application": "rbd",
    "storage.ceph.cephfs": None,
    "storage.ceph.cephfs.name": "cephfs",
    "storage.ceph.cephfs.mount": "/mnt/cephfs",
    "storage.ceph.cephfs.clients": list(CEPHFS_CLIENT_ROLES),
    "storage.ceph.cephfs.client": "kernel",
    "storage.ceph.zap": [],
    "storage.ceph.config": {},
    "backups": None,
    "backups.retention": {},
    "backups.retention.daily": 7,
    "backups.retention.weekly": 4,
    "backups.retention.monthly": 0,
    "backups.sources": [],
    "backups.restore_test": True,
    "backups.offsite": None,
    "packages": {},
    "packages.proxy": None,
    "packages.mirror": None,
    "packages.unattended_upgrades": "security",
    "access": {},
    "access.ansible_user": "root",
    "access.ssh_port": 22,
    "access.admin_users": [],
    "access.admin_users.[].ssh_keys": [],
    "access.admin_users.[].sudo": True,
    "acceptance": {},
    "acceptance.network": None,
    "acceptance.network.duration_s": 10,
    "acceptance.network.outlier_pct": 25,
    "acceptance.gpu": {},
    "acceptance.gpu.max_temp_c": 85,
    # uncorrectable volatile ECC errors since the driver loaded: one means a job saw bad memory
    "acceptance.gpu.max_ecc_uncorrected": 0,
    # a pending remap needs a GPU reset before the row is replaced
    "acceptance.gpu.max_remapped_rows_pending": 0,
    # pre-Ampere GPUs retire pages instead of remapping rows; many retired pages means RMA
    "acceptance.gpu.max_retired_pages": 60,
    "acceptance.gpu.min_pcie_width_ratio": 1.0,
    "acceptance.gpu.require_nvlink": True,
    # NVML's memory total varies a little between VBIOS releases
    "acceptance.gpu.memory_tolerance_pct": 1.0,
    "acceptance.gpu.fail_on_xids": FATAL_XIDS,
    # storage acceptance runs in plans with Ceph; its pool is derived below
    "acceptance.storage": {},
    "acceptance.storage.bench_seconds": 10,
    # collectives run where the software section gives a pool torch or MPI (docs/collectives.md)
    "acceptance.collectives": {},
    "acceptance.collectives.min_link_fraction": 0.8,
    "acceptance.collectives.intra_node_min_busbw_GBps": None,
    "acceptance.collectives.max_message_mib": 64,
    "acceptance.collectives.training_steps": 60,
    "acceptance.collectives.timeout_s": 600,
    # the run history; its database defaults to history.sqlite beside the reports
    "acceptance.history": {},
    "acceptance.history.database": None,
    "acceptance.history.tolerance": {},
    "acceptance.history.tolerance.bandwidth": {},
    "acceptance.history.tolerance.bandwidth.lower": -0.05,
    "acceptance.history.tolerance.bandwidth.upper": None,
    "acceptance.history.tolerance.latency": {},
    "acceptance.history.tolerance.latency.lower": None,
    "acceptance.history.tolerance.latency.upper": None,
    "acceptance.history.tolerance.storage": {},
    "acceptance.history.tolerance.storage.lower": -0.05,
    "acceptance.history.tolerance.storage.upper": None,
    "lab": None,
    "lab.rate_scale": 0.01,
    "lab.image": "bare",
    "lab.bare": [],
    # software exists only where the plan writes it (docs/software.md)
    "software": None,
    "software.environments.*.[].build": "cpu",
    "software.environments.*.[].prefix": None,
    "software.environments.*.[].index_url": None,
    "software.environments.*.[].module": None,
    "software.environments.*.[].classes": [],
    "software.environments.*.[].pools": [],
    # monitoring exists in plans with a monitoring_server (see _monitoring_section)
    "monitoring": None,
    "monitoring.scrape_interval_s": 30,
    "monitoring.evaluation_interval_s": 30,
    "monitoring.retention_days": 15,
    # a GPU under load may throttle for seconds; minutes of it cost a job's speed
    "monitoring.throttle_minutes": 5,
    # how long a condition lasts before it alerts: a chrony restart, a re-negotiating port or
    # an OSD restarting must not page; monitoring.alert_after_minutes.node_down is derived below
    "monitoring.alert_after_minutes": {},
    "monitoring.alert_after_minutes.clock": 10,
    "monitoring.alert_after_minutes.nic": 5,
    "monitoring.alert_after_minutes.ceph_osd": 2,
    "monitoring.alert_after_minutes.slurm_down": 5,
    "monitoring.alert_after_minutes.slurm_drained": 10,
    "monitoring.alert_after_minutes.k8s_not_ready": 5,
    "monitoring.alert_after_minutes.k8s_apiserver": 2,
    # Alertmanager's own defaults: a group's first alerts wait 30 s for the rest of the group,
    # its new alerts go out every 5 minutes, what still fires is sent again every 4 hours
    "monitoring.notifications": {},
    "monitoring.notifications.group_wait_s": 30,
    "monitoring.notifications.group_interval_s": 300,
    "monitoring.notifications.repeat_interval_minutes": 240,
    # Ceph's own nearfull ratio; full (95 %) stops writes
    "monitoring.ceph_pool_full_pct": 85,
    # the age `cluster-plan acceptance --when changed` accepts by default
    "monitoring.acceptance_max_age_days": 7,
    # monitoring.backup_max_age_hours and default_receiver are derived below
    "monitoring.smtp": None,
    "monitoring.smtp.port": 25,
    "monitoring.receivers": {},
    "monitoring.receivers.*.webhook": None,
    "monitoring.receivers.*.email": None,
    "monitoring.routes": {},
    "monitoring.routes.*.severity": None,
    "monitoring.routes.*.team": None,
    "monitoring.routes.*.continue": False,
}


def management_network(plan: dict[str, Any]) -> str | None:
    """The network Ansible reaches nodes on: the plan's choice, else its first network."""
    cluster = plan.get("cluster")
    chosen = cluster.get("management_network") if isinstance(cluster, dict) else None
    networks = plan.get("networks")
    if chosen:
        return str(chosen)
    return next(iter(networks), None) if isinstance(networks, dict) else None


def tested_networks(plan: dict[str, Any]) -> list[str]:
    """The networks acceptance measures when the plan does not say: every network but the
    management network (its thresholds are for the fast fabrics), or the only one."""
    networks = list(plan["networks"]) if isinstance(plan.get("networks"), dict) else []
    mgmt = management_network(plan)
    return [n for n in networks if n != mgmt] or networks


def _scheduler_sections(plan: dict[str, Any]) -> None:
    """A Slurm plan has Slurm settings even when it writes none, a Kubernetes plan Kubernetes
    settings (and neither has the other's, so that settings of the other scheduler stay a
    mistake to report)."""
    scheduler = plan.get("scheduler")
    if isinstance(scheduler, dict) and scheduler.get("type") in ("slurm", "kubernetes"):
        section = str(scheduler["type"])
        scheduler.setdefault(section, None)
        scheduler[section] = scheduler[section] or {}


def _set_derived(plan: dict[str, Any]) -> None:
    """Values the plan leaves to derivation, in order: a later one may read an earlier one."""
    cluster = _mapping(plan, "cluster")
    if cluster is not None and cluster.get("management_network") is None:
        cluster["management_network"] = management_network(plan)
    network = _mapping(_mapping(plan, "acceptance"), "network")
    if network is not None and not network.get("networks"):
        network["networks"] = tested_networks(plan)
    scheduler = _mapping(plan, "scheduler")
    slurm = _mapping(scheduler, "slurm")
    if slurm is not None and cluster is not None:
        slurm.setdefault("cluster_name", cluster.get("name"))
    kubernetes = _mapping(scheduler, "kubernetes")
    if kubernetes is not None and kubernetes.get("node_network") is None:
        kubernetes["node_network"] = management_network(plan)
    networks = _mapping(plan, "networks") or {}
    ceph = _mapping(_mapping(plan, "storage"), "ceph")
    if ceph is not None:
        _ceph_networks(plan, ceph, networks)
        _ceph_derived(plan, ceph)
    for group in (_mapping(plan, "node_groups") or {}).values():
        if isinstance(group, dict) and "networks" not in group:
            group["networks"] = list(networks)


def _mapping(parent: Any, key: str) -> dict[str, Any] | None:
    """parent[key] where both are mappings; None otherwise (the schema reports the rest)."""
    value = parent.get(key) if isinstance(parent, dict) else None
    return value if isinstance(value, dict) else None


def _ceph_networks(plan: dict[str, Any], ceph: dict[str, Any], networks: dict[str, Any]) -> None:
    """Ceph's public network: the storage network, else management; its cluster network: the
    public one. One network unless the plan says; a derived value never repeats a plan's
    mistake (a public network the plan does not have is not copied)."""
    if not networks:
        return
    if ceph.get("public_network") is None:
        storage_net = "storage" if "storage" in networks else None
        ceph["public_network"] = storage_net or management_network(plan)
    if ceph.get("cluster_network") is None and ceph["public_network"] in networks:
        ceph["cluster_network"] = ceph["public_network"]


def _ceph_derived(plan: dict[str, Any], ceph: dict[str, Any]) -> None:
    """Ceph's min_size (Ceph's own default: a majority of the replicas) and the pool that
    storage acceptance benchmarks (the first rbd pool, else the first pool)."""
    pools = [p for p in ceph.get("pools") or [] if isinstance(p, dict)]
    for pool in pools:
        if pool.get("min_size") is None and isinstance(pool.get("size"), int):
            pool["min_size"] = pool["size"] - pool["size"] // 2
    acceptance = plan.get("acceptance")
    storage = acceptance.get("storage") if isinstance(acceptance, dict) else None
    if isinstance(storage, dict) and storage.get("pool") is None and pools:
        rbd = [p.get("name") for p in pools if p.get("application") == "rbd"]
        storage["pool"] = (rbd or [pools[0].get("name")])[0]


def _set_nvswitch(plan: dict[str, Any]) -> None:
    """NVSwitch belongs to the board: the catalog knows which board sizes of a model carry it
    (8-GPU HGX boards of SXM models; not 4-GPU HGX boards, PCIe cards or the 8x V100 DGX-1)."""
    hardware = plan.get("hardware")
    for profile in hardware.values() if isinstance(hardware, dict) else ():
        accel = profile.get("accelerators") if isinstance(profile, dict) else None
        if isinstance(accel, dict) and accel.get("nvswitch") is None:
            model, count = accel.get("model"), accel.get("count")
            known = isinstance(model, str) and type(count) is int
            accel["nvswitch"] = known and nvswitch_default(str(model), int(str(count)))


def _team_classes(plan: dict[str, Any]) -> None:
    """A team that names no classes may use every class of the plan (none without one)."""
    scheduler = plan.get("scheduler")
    classes = scheduler.get("workload_classes") if isinstance(scheduler, dict) else None
    every = list(classes) if isinstance(classes, dict) else []
    teams = plan.get("teams")
    for team in teams.values() if isinstance(teams, dict) else []:
        if isinstance(team, dict) and team.get("classes") is None:
            team["classes"] = list(every)


def _monitoring_section(plan: dict[str, Any]) -> None:
    """A plan with a monitoring_server has monitoring settings even when it writes none."""
    groups = plan.get("node_groups")
    roles = [
        g.get("roles")
        for g in (groups.values() if isinstance(groups, dict) else ())
        if isinstance(g, dict)
    ]
    if any(isinstance(r, list) and "monitoring_server" in r for r in roles):
        plan["monitoring"] = plan.get("monitoring") or {}


def _monitoring_derived(plan: dict[str, Any]) -> None:
    """The backup age that alerts (the schedule's longest gap and a grace for the run), how
    long a node is silent before NodeDown (three scrapes) and the receiver of alerts no route
    takes (the first receiver)."""
    monitoring = plan.get("monitoring")
    if not isinstance(monitoring, dict):
        return
    backups = plan.get("backups")
    schedule = backups.get("schedule") if isinstance(backups, dict) else None
    if monitoring.get("backup_max_age_hours") is None:
        gap = longest_gap_hours(schedule) if isinstance(schedule, str) else None
        monitoring["backup_max_age_hours"] = None if gap is None else gap + BACKUP_GRACE_HOURS
    after = monitoring.get("alert_after_minutes")
    scrape = monitoring.get("scrape_interval_s")
    if isinstance(after, dict) and after.get("node_down") is None and isinstance(scrape, int):
        # three missed scrapes, so that one lost scrape never pages
        minutes = max(2, 3 * scrape / 60)
        after["node_down"] = int(minutes) if float(minutes).is_integer() else minutes
    receivers = monitoring.get("receivers")
    if monitoring.get("default_receiver") is None:
        names = list(receivers) if isinstance(receivers, dict) else []
        monitoring["default_receiver"] = names[0] if names else None


# a backup run (random delay, Borg, the drill) may take this long after its scheduled time
BACKUP_GRACE_HOURS = 2

SECTIONS: tuple[Callable[[dict[str, Any]], None], ...] = (_scheduler_sections, _monitoring_section)
DERIVED: tuple[Callable[[dict[str, Any]], None], ...] = (
    _set_derived,
    _set_nvswitch,
    _team_classes,
    _monitoring_derived,
)


def _parents(node: Any, parts: list[str]) -> Iterator[Any]:
    """Every container a path's parent parts lead to (`*` any key, `[]` any item)."""
    if not parts:
        yield node
        return
    head, rest = parts[0], parts[1:]
    if head == "*" and isinstance(node, dict):
        for value in node.values():
            yield from _parents(value, rest)
    elif head == "[]" and isinstance(node, list):
        for value in node:
            yield from _parents(value, rest)
    elif isinstance(node, dict) and head in node:
        yield from _parents(node[head], rest)


def with_defaults(plan: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``plan`` with every default filled in. Lenient: a plan with schema errors
    gets what can be filled, and nothing is filled under a value of the wrong kind."""
    filled = copy.deepcopy(plan)
    for make in SECTIONS:
        make(filled)
    # parents before children, so that a section made here gets its own defaults too
    for path in sorted(PLAN_DEFAULTS, key=lambda p: p.count(".")):
        *parent, key = path.split(".")
        default = PLAN_DEFAULTS[path]
        for container in _parents(filled, parent):
            if isinstance(container, dict) and container.get(key) is None:
                container[key] = copy.deepcopy(default)
    for derive in DERIVED:
        derive(filled)
    return filled


def section_defaults(prefix: str) -> dict[str, Any]:
    """The defaults under one section, e.g. section_defaults("acceptance.gpu")."""
    head = prefix + "."
    return {
        path[len(head) :]: copy.deepcopy(value)
        for path, value in PLAN_DEFAULTS.items()
        if path.startswith(head) and "." not in path[len(head) :]
    }
