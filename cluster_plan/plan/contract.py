"""The expanded plan's contract: the one shape every consumer reads.

`expand()` returns an `ExpandedPlan`; the inventory plugin hands it to Ansible (`plan_host`
per host, `cluster_plan` on `all`), and the lab, acceptance, diff, graph and audit read it.
Every key is always present: defaults are filled by cluster_plan.plan.defaults, so a consumer
never decides one. Optional parts are None (a host without accelerators, a plan without a
lab). docs/expanded-data.md documents these types and a test keeps the two in step; the
golden expanded files are checked against them at run time (`conformance_errors`).
"""

import types
import typing
from collections.abc import Callable
from typing import Any, Literal, TypedDict, Union, get_args, get_origin


class TimeReference(TypedDict):
    stratum: int  # the ntp_server hosts serve their own clock at this stratum


class Cluster(TypedDict):
    name: str
    domain: str
    os: str | None
    timezone: str
    description: str
    management_network: str  # the network Ansible reaches nodes on
    time_reference: typing.NotRequired[TimeReference]  # only when the plan says so


class Network(TypedDict):
    cidr: str
    prefixlen: int
    netmask: str
    gateway: str | None
    dns: list[str]
    ntp: list[str]
    mtu: int
    vlan: int | None
    reserved: int | list[str]  # as in the plan: a count of first addresses, or addresses
    description: str


class Interface(TypedDict):
    device: str  # the device name on the host (a NIC of the profile, or the network's name)
    address: str
    prefixlen: int
    cidr: str
    netmask: str
    gateway: str | None
    mtu: int
    vlan: int | None


class Disk(TypedDict, total=False):
    name: typing.Required[str]
    size_gb: typing.Required[float]
    type: typing.Required[str]
    use: typing.Required[str]
    device: str  # only when the plan names the device


class Accelerators(TypedDict):
    model: str  # catalog key
    count: int
    vendor: str  # nvidia | generic
    kind: Literal["gpu", "accelerator"]  # gpu: NVIDIA, driver installed by this project
    gres_type: str  # Slurm gres type name
    driver_branch: int | None  # the plan's pin, if any
    nvswitch: bool  # the board has NVSwitch: the fabric manager runs
    catalog: dict[str, Any]  # the catalog entry


class HostSoftware(TypedDict):
    version: str
    source: Literal["debian", "pip"]
    build: Literal["cpu", "cuda"]
    packages: list[str]  # the versioned one first
    prefix: str | None  # pip: the virtual environment, on a shared file system
    index_url: str | None  # pip: the package index; None: PyPI
    module: str | None  # the Lmod module, name/version


class Host(TypedDict):
    hostname: str
    fqdn: str
    node_group: str
    index: int
    rack: str | None
    access_switch: str | None
    aggregation_switch: str | None
    core_switches: list[str]
    link_gbps: float | None  # the host's access link speed
    hardware_profile: str
    cpu_cores: int
    memory_gb: float
    disks: list[Disk]
    accelerators: Accelerators | None
    roles: list[str]
    pool: str | None
    datasets: list[str]  # datasets whose racks include the host's rack
    interfaces: dict[str, Interface]  # one per network the host is on
    address: str  # on the management network: Ansible's ansible_host
    software: dict[str, HostSoftware]  # environment -> the build the host gets


class CoreSwitch(TypedDict, total=False):
    description: str


class AggregationSwitch(TypedDict):
    uplinks: list[str]
    uplink_gbps: float | None
    description: typing.NotRequired[str]


class AccessSwitch(TypedDict):
    uplink: str
    racks: list[str]
    link_gbps: float
    uplink_gbps: float | None
    ports: int | None
    description: typing.NotRequired[str]


class Topology(TypedDict):
    core: dict[str, CoreSwitch]
    aggregation: dict[str, AggregationSwitch]
    access: dict[str, AccessSwitch]


class Rack(TypedDict):
    access_switch: str | None
    row: str | None
    description: str
    location: typing.NotRequired[str]
    power: typing.NotRequired[dict[str, Any]]  # kw or feeds, as in the plan
    cooling: typing.NotRequired[dict[str, Any]]  # kw and kind, as in the plan


class Power(TypedDict):
    """Settings of the power and cooling checks (docs/capacity.md)."""

    typical_load_pct: float  # typical draw as a share of peak
    warn_utilization_pct: float  # a rack past this share of a budget is warned about
    air_cooling_max_kw: float  # the most heat air removes from one rack


class ClassRequirements(TypedDict, total=False):
    """What a workload class's GPUs must have (docs/capacity.md), as in the plan."""

    gpu_memory_gb: float
    nvlink: bool
    accelerators: list[str]  # catalog models


class WorkloadClass(TypedDict):
    pool: str
    needs: Literal["gpu", "accelerator", "cpu", "any"]
    kind: typing.NotRequired[Literal["training", "inference", "simulation", "rendering", "general"]]
    requires: typing.NotRequired[ClassRequirements]
    default: bool
    max_time: str
    description: str
    priority: typing.NotRequired[int]


class Dataset(TypedDict):
    racks: list[str]
    description: str
    pool: str | None  # the Ceph pool holding it
    path: typing.NotRequired[str]
    size_gb: typing.NotRequired[float]


class Reservation(TypedDict):
    start: str
    duration_minutes: int
    node_groups: list[str]
    nodes: list[str]
    flags: list[str]
    users: list[str]
    accounts: list[str]


class SlurmSettings(TypedDict):
    accounting: bool
    gres_autodetect: bool
    cluster_name: str
    usage_period: Literal["none", "daily", "weekly", "monthly", "quarterly", "yearly"]
    fairshare_half_life_days: float
    state_save: str  # StateSaveLocation; shared storage for an HA pair
    controller_timeout_s: int  # SlurmctldTimeout
    node_timeout_s: int  # SlurmdTimeout
    message_timeout_s: int  # MessageTimeout


class Scheduler(TypedDict):
    type: Literal["slurm", "kubernetes"]
    workload_classes: dict[str, WorkloadClass]
    datasets: dict[str, Dataset]
    reservations: dict[str, Reservation]
    slurm: typing.NotRequired[SlurmSettings]  # Slurm plans only
    kubernetes: typing.NotRequired[dict[str, Any]]  # Kubernetes plans only


class TeamLimits(TypedDict):
    gpus: int | None  # NVIDIA GPUs held at once
    accelerators: int | None  # other accelerators of each type held at once
    gpu_hours: float | None  # per scheduler.slurm.usage_period
    max_time: str | None  # a Slurm time


class TeamUser(TypedDict):
    name: str
    uid: int
    ssh_keys: list[str]


class Team(TypedDict):
    description: str
    parent: str | None
    fairshare: int
    classes: list[str]  # the plan's, else every workload class
    limits: TeamLimits
    users: list[TeamUser]


class NetworkAcceptance(TypedDict):
    networks: list[str]  # the plan's, else every network but the management network
    duration_s: float
    outlier_pct: float
    min_gbps: typing.NotRequired[float]
    max_latency_ms: typing.NotRequired[float]
    max_loss_pct: typing.NotRequired[float]


class GpuAcceptance(TypedDict):
    max_temp_c: float
    max_ecc_uncorrected: int
    max_remapped_rows_pending: int
    max_retired_pages: int
    min_pcie_width_ratio: float
    require_nvlink: bool
    memory_tolerance_pct: float
    fail_on_xids: list[int]


class StorageAcceptance(TypedDict):
    bench_seconds: int
    pool: typing.NotRequired[str]  # plans with Ceph pools: the first rbd pool unless set


class Tolerance(TypedDict):
    lower: float | None  # fractions of the earlier run's value; None: no bound
    upper: float | None


class HistoryTolerance(TypedDict):
    bandwidth: Tolerance
    latency: Tolerance
    storage: Tolerance


class AcceptanceHistory(TypedDict):
    database: str | None  # None: history.sqlite beside the reports
    tolerance: HistoryTolerance


class CollectivesAcceptance(TypedDict):
    min_link_fraction: float
    intra_node_min_busbw_GBps: float | None
    max_message_mib: int
    training_steps: int
    timeout_s: int


class Acceptance(TypedDict):
    network: NetworkAcceptance | None
    gpu: GpuAcceptance
    storage: StorageAcceptance
    collectives: CollectivesAcceptance
    history: AcceptanceHistory


class Retention(TypedDict):
    daily: int
    weekly: int
    monthly: int


class BackupTarget(TypedDict):
    host: str  # a plan host
    path: str  # one repository per node under it: PATH/HOST


class Backups(TypedDict):
    schedule: str  # systemd OnCalendar
    retention: Retention
    target: BackupTarget
    offsite: BackupTarget | None  # a second, independent copy
    sources: list[str]
    restore_test: bool


class Lab(TypedDict):
    rate_scale: float  # lab links run at plan speed times this
    # what the nodes boot on (docs/lab.md), and hosts that boot the bare base even so; an
    # expanded plan written before these keys reads as bare
    image: typing.NotRequired[Literal["packages", "bare"]]
    bare: typing.NotRequired[list[str]]


# `from` and `continue` are Python keywords: these two are spelled the functional way.
Smtp = TypedDict("Smtp", {"host": str, "port": int, "from": str})
MonitoringRoute = TypedDict(
    "MonitoringRoute",
    {
        "receiver": str,
        "severity": Literal["warning", "critical"] | None,  # None: any severity
        "team": str | None,  # None: any alert; else alerts about the team's pools' nodes
        "continue": bool,
    },
)


class Receiver(TypedDict):
    webhook: str | None
    email: str | None


class AlertAfter(TypedDict):
    """Minutes each condition lasts before its alert fires (Prometheus' `for`)."""

    node_down: float  # three scrapes, at least 2, unless set
    clock: float
    nic: float
    ceph_osd: float
    slurm_down: float
    slurm_drained: float
    k8s_not_ready: float
    k8s_apiserver: float


class Notifications(TypedDict):
    """When Alertmanager sends (its group_wait, group_interval and repeat_interval)."""

    group_wait_s: int
    group_interval_s: int
    repeat_interval_minutes: int


class Monitoring(TypedDict):
    scrape_interval_s: int
    evaluation_interval_s: int
    retention_days: int
    throttle_minutes: int
    alert_after_minutes: AlertAfter
    notifications: Notifications
    ceph_pool_full_pct: float
    acceptance_max_age_days: float
    backup_max_age_hours: float | None  # from backups.schedule unless set; None without backups
    smtp: Smtp | None
    receivers: dict[str, Receiver]
    default_receiver: str | None  # the first receiver unless set; None without receivers
    routes: dict[str, MonitoringRoute]  # plan order: Alertmanager tries them in this order


class Packages(TypedDict):
    proxy: str | None
    mirror: str | None
    unattended_upgrades: Literal["none", "security", "all"]


class AdminUser(TypedDict):
    name: str
    ssh_keys: list[str]
    sudo: bool


class Access(TypedDict):
    ansible_user: str
    ssh_port: int
    admin_users: list[AdminUser]


class SoftwareBuild(HostSoftware):
    classes: list[str]
    pools: list[str]


class Software(TypedDict):
    environments: dict[str, list[SoftwareBuild]]  # plan order


class ExpandedPlan(TypedDict):
    cluster: Cluster
    networks: dict[str, Network]
    topology: Topology
    racks: dict[str, Rack]
    power: Power
    hardware: dict[str, dict[str, Any]]  # the profiles, as in the plan with defaults
    scheduler: Scheduler | None
    teams: dict[str, Team]  # plan order
    node_groups: dict[str, dict[str, Any]]  # as in the plan with defaults, without `nodes`
    storage: dict[str, Any]  # local, nfs, ceph (None when not planned)
    backups: Backups | None
    packages: Packages
    access: Access
    acceptance: Acceptance
    lab: Lab | None  # None unless the plan is realized by the lab
    monitoring: Monitoring | None  # None unless a host has the role monitoring_server
    software: Software | None  # None unless the plan has a software section
    hosts: dict[str, Host]  # node group order, then index
    groups: dict[str, list[str]]  # Ansible group -> sorted host names


# ---- run-time conformance (tests check the golden expanded files against the contract)


def _name(kind: Any) -> str:
    return getattr(kind, "__name__", None) or str(kind)


def _typed_dict_errors(value: Any, kind: Any, path: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: expected a mapping ({_name(kind)}), got {type(value).__name__}"]
    hints = typing.get_type_hints(kind)
    errors = []
    missing = sorted(kind.__required_keys__ - value.keys())
    extra = sorted(value.keys() - hints.keys())
    errors += [f"{path}: {_name(kind)} lacks {key!r}" for key in missing]
    errors += [f"{path}: {_name(kind)} has no key {key!r}" for key in extra]
    for key in value.keys() & hints.keys():
        errors += conformance_errors(value[key], hints[key], f"{path}.{key}")
    return errors


def conformance_errors(value: Any, kind: Any, path: str = "$") -> list[str]:
    """Where ``value`` does not have the shape ``kind`` describes (empty when it does)."""
    if kind is Any:
        return []
    if isinstance(kind, type) and typing.is_typeddict(kind):
        return _typed_dict_errors(value, kind, path)
    by_origin = _BY_ORIGIN.get(get_origin(kind))
    if by_origin is not None:
        return by_origin(value, kind, path)
    return _scalar_errors(value, kind, path)


def _wrapped_errors(value: Any, kind: Any, path: str) -> list[str]:
    """Required[X] and NotRequired[X] are X."""
    return conformance_errors(value, get_args(kind)[0], path)


def _union_errors(value: Any, kind: Any, path: str) -> list[str]:
    options = [conformance_errors(value, k, path) for k in get_args(kind)]
    return [] if any(not o for o in options) else min(options, key=len)


def _literal_errors(value: Any, kind: Any, path: str) -> list[str]:
    return [] if value in get_args(kind) else [f"{path}: {value!r} not in {get_args(kind)}"]


def _list_errors(value: Any, kind: Any, path: str) -> list[str]:
    if not isinstance(value, list):
        return [f"{path}: expected a list, got {type(value).__name__}"]
    (item,) = get_args(kind)
    return [e for i, v in enumerate(value) for e in conformance_errors(v, item, f"{path}[{i}]")]


def _dict_errors(value: Any, kind: Any, path: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: expected a mapping, got {type(value).__name__}"]
    _, item = get_args(kind)
    return [e for k, v in value.items() for e in conformance_errors(v, item, f"{path}.{k}")]


_BY_ORIGIN: dict[Any, Callable[[Any, Any, str], list[str]]] = {
    typing.Required: _wrapped_errors,
    typing.NotRequired: _wrapped_errors,
    Union: _union_errors,
    types.UnionType: _union_errors,
    Literal: _literal_errors,
    list: _list_errors,
    dict: _dict_errors,
}


def _scalar_errors(value: Any, kind: Any, path: str) -> list[str]:
    if kind is type(None):
        return [] if value is None else [f"{path}: expected null, got {value!r}"]
    if kind is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return [] if ok else [f"{path}: expected a number, got {value!r}"]
    if kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return [] if ok else [f"{path}: expected an integer, got {value!r}"]
    if isinstance(kind, type):
        return [] if isinstance(value, kind) else [f"{path}: expected {_name(kind)}, got {value!r}"]
    return [f"{path}: cannot check against {kind!r}"]
