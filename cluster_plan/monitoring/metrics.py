"""Every metric the monitoring reads, in one table: its name, type, help and labels.

The project's collectors (cluster_plan/exporters/) build their families from the entries
whose source is one of them; the alert rules, the dashboards and the status page name every
metric through this table, the ones node_exporter, Prometheus and Ceph's manager export
included; docs/METRICS.md is generated from it (cluster_plan.reference_docs). A counter's
name ends in `_total`, as the exposition writes it.

Standard library only: the collectors' zip runs it on the nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MetricType = Literal["gauge", "counter"]

# Who writes a metric: one of the project's collectors (`cluster-plan exporter NAME`; the
# writer of every collector's status file is `textfile`), or an exporter of someone else's.
COLLECTORS = ("gpu", "slurm", "kubernetes", "state", "clock", "textfile")
EXTERNAL = ("prometheus", "node_exporter", "ceph-mgr")

GPU_LABELS = ("node", "gpu", "uuid")


@dataclass(frozen=True)
class Metric:
    name: str
    type: MetricType
    help: str
    labels: tuple[str, ...]
    source: str  # a collector of COLLECTORS, or an exporter of EXTERNAL


def _gpu(name: str, help_text: str, *labels: str, kind: MetricType = "gauge") -> Metric:
    return Metric(f"cluster_plan_gpu_{name}", kind, help_text, (*GPU_LABELS, *labels), "gpu")


# ---- the GPU collector ---------------------------------------------------------------------
GPU_NVML_UP = Metric("cluster_plan_gpu_nvml_up", "gauge", "1 when NVML answered, 0 when not",
                     ("node",), "gpu")  # fmt: skip
GPU_EXPECTED = Metric(
    "cluster_plan_gpu_expected", "gauge", "GPUs the plan says this node has", ("node",), "gpu"
)
GPU_PRESENT = Metric("cluster_plan_gpu_present", "gauge", "GPUs NVML sees", ("node",), "gpu")
GPU_TEMPERATURE = _gpu("temperature_celsius", "GPU core temperature")
GPU_POWER = _gpu("power_watts", "Power draw")
GPU_POWER_LIMIT = _gpu("power_limit_watts", "Enforced power limit")
GPU_SM_CLOCK = _gpu("sm_clock_hertz", "SM clock")
GPU_THROTTLE = _gpu("throttle", "1 while the clock reason is active", "reason")
GPU_ECC_ERRORS = _gpu(
    "ecc_errors_total",
    "ECC errors NVML counted (volatile: since the driver loaded; aggregate: over the GPU's life)",
    "scope",
    "kind",
    kind="counter",
)
GPU_REMAPPED_ROWS = _gpu("remapped_rows", "Remapped memory rows", "kind")
GPU_NVLINK_ERRORS = _gpu(
    "nvlink_errors_total", "NVLink errors NVML counted", "link", "kind", kind="counter"
)
GPU_XID_LAST = _gpu("xid_last", "Last XID code seen (0: none)")
GPU_XID_EVENTS = _gpu("xid_events_total", "XID events counted", "xid", kind="counter")

# ---- the Slurm collector (on the controller) -----------------------------------------------
SLURM_NODE_STATE = Metric(
    "cluster_plan_slurm_node_state",
    "gauge",
    "1 per node and partition for its state",
    ("node", "partition", "state"),
    "slurm",
)
SLURM_NODE_GPUS = Metric(
    "cluster_plan_slurm_node_gpus", "gauge", "GPUs configured (gres)", ("node",), "slurm"
)
SLURM_NODE_GPUS_ALLOCATED = Metric(
    "cluster_plan_slurm_node_gpus_allocated", "gauge", "GPUs allocated to jobs", ("node",), "slurm"
)
SLURM_JOBS_PENDING = Metric(
    "cluster_plan_slurm_jobs_pending",
    "gauge",
    "Pending jobs per partition (workload class) and account (team)",
    ("partition", "account"),
    "slurm",
)
SLURM_SLURMDBD_UP = Metric(
    "cluster_plan_slurm_slurmdbd_up", "gauge", "1 when sacctmgr answers", (), "slurm"
)

# ---- the Kubernetes collector (on the first control plane) ----------------------------------
K8S_NODE_READY = Metric(
    "cluster_plan_kubernetes_node_ready",
    "gauge",
    "1 per node for the status of its Ready condition (true, false, unknown)",
    ("node", "status"),
    "kubernetes",
)
K8S_NODE_UNSCHEDULABLE = Metric(
    "cluster_plan_kubernetes_node_unschedulable",
    "gauge",
    "1 while the node is cordoned (spec.unschedulable)",
    ("node",),
    "kubernetes",
)
K8S_NODE_INFO = Metric(
    "cluster_plan_kubernetes_node_info",
    "gauge",
    "1 per node, with the kubelet version it reports",
    ("node", "kubelet_version"),
    "kubernetes",
)
K8S_NODE_ALLOCATABLE = Metric(
    "cluster_plan_kubernetes_node_allocatable",
    "gauge",
    "Accelerators the node offers to pods (status.allocatable), per extended resource",
    ("node", "resource"),
    "kubernetes",
)
K8S_NODE_ALLOCATED = Metric(
    "cluster_plan_kubernetes_node_allocated",
    "gauge",
    "Accelerators requested by the pods bound to the node and not finished, per resource",
    ("node", "resource"),
    "kubernetes",
)
K8S_APISERVER_UP = Metric(
    "cluster_plan_kubernetes_apiserver_up",
    "gauge",
    "1 when the API server answered /readyz with ok",
    (),
    "kubernetes",
)
K8S_APISERVER_READYZ = Metric(
    "cluster_plan_kubernetes_apiserver_readyz_seconds",
    "gauge",
    "How long the /readyz request took (kubectl's start included)",
    (),
    "kubernetes",
)

# ---- the state collector (on the head node) ------------------------------------------------
ACCEPTANCE_LAST_RUN = Metric(
    "cluster_plan_acceptance_last_run_timestamp_seconds",
    "gauge",
    "When the last acceptance run was generated",
    (),
    "state",
)
ACCEPTANCE_PASSED = Metric(
    "cluster_plan_acceptance_passed", "gauge", "1 when the last acceptance run passed", (), "state"
)
BACKUP_LAST_SUCCESS = Metric(
    "cluster_plan_backup_last_success_timestamp_seconds",
    "gauge",
    "The node's oldest last snapshot over its repositories (0: none)",
    ("node",),
    "state",
)
BACKUP_DRILL_PASSED = Metric(
    "cluster_plan_backup_drill_passed",
    "gauge",
    "1 when the last restore drill passed",
    ("node",),
    "state",
)
DRIFT_FINDINGS = Metric(
    "cluster_plan_drift_findings", "gauge", "Drift findings of the last check", (), "state"
)

# ---- the clock collector (every host) ------------------------------------------------------
CLOCK_SYNCHRONISED = Metric(
    "cluster_plan_clock_synchronised",
    "gauge",
    "1 when chronyd tracks a real time source (an NTP server or a reference clock)",
    (),
    "clock",
)
CLOCK_LOCAL_REFERENCE = Metric(
    "cluster_plan_clock_local_reference",
    "gauge",
    "1 when chronyd serves its own clock as the reference (chrony's local directive)",
    (),
    "clock",
)
CLOCK_STRATUM = Metric(
    "cluster_plan_clock_stratum", "gauge", "chronyd's stratum (0: unsynchronised)", (), "clock"
)
CLOCK_OFFSET = Metric(
    "cluster_plan_clock_offset_seconds",
    "gauge",
    "the system clock's offset chronyd is correcting (chronyc's System time)",
    (),
    "clock",
)
CLOCK_ROOT_DISTANCE = Metric(
    "cluster_plan_clock_root_distance_seconds",
    "gauge",
    "root delay / 2 + root dispersion: the bound on the clock's error",
    (),
    "clock",
)

# ---- every collector's status file ---------------------------------------------------------
COLLECTOR_SUCCESS = Metric(
    "cluster_plan_collector_success",
    "gauge",
    "1 when the collector ran cleanly, 0 with the reason in its log.",
    ("collector",),
    "textfile",
)

# ---- read from others' exporters -----------------------------------------------------------
UP = Metric("up", "gauge", "1 when Prometheus scraped the target", ("job", "instance"),
            "prometheus")  # fmt: skip
NODE_NETWORK_SPEED = Metric(
    "node_network_speed_bytes",
    "gauge",
    "A network device's speed in bytes per second (-1: link down)",
    ("device",),
    "node_exporter",
)
NODE_NETWORK_MTU = Metric(
    "node_network_mtu_bytes", "gauge", "A network device's MTU", ("device",), "node_exporter"
)
NODE_SYSTEMD_UNIT_STATE = Metric(
    "node_systemd_unit_state",
    "gauge",
    "1 for a systemd unit's current state (the role enables chrony's unit only)",
    ("name", "state", "type"),
    "node_exporter",
)
NODE_TIMEX_OFFSET = Metric(
    "node_timex_offset_seconds", "gauge", "The kernel's clock offset", (), "node_exporter"
)
CEPH_HEALTH_STATUS = Metric(
    "ceph_health_status", "gauge", "Ceph's health: 0 OK, 1 WARN, 2 ERR", (), "ceph-mgr"
)
CEPH_OSD_UP = Metric("ceph_osd_up", "gauge", "1 while the OSD is up", ("ceph_daemon",), "ceph-mgr")
CEPH_OSD_METADATA = Metric(
    "ceph_osd_metadata", "gauge", "An OSD's host and devices", ("ceph_daemon", "hostname"),
    "ceph-mgr",
)  # fmt: skip
CEPH_POOL_STORED = Metric(
    "ceph_pool_stored", "gauge", "Bytes stored in the pool", ("pool_id",), "ceph-mgr"
)
CEPH_POOL_MAX_AVAIL = Metric(
    "ceph_pool_max_avail", "gauge", "Bytes the pool can still take", ("pool_id",), "ceph-mgr"
)
CEPH_POOL_METADATA = Metric(
    "ceph_pool_metadata", "gauge", "A pool's name", ("pool_id", "name"), "ceph-mgr"
)

METRICS: tuple[Metric, ...] = tuple(
    value for value in list(globals().values()) if isinstance(value, Metric)
)
BY_NAME = {metric.name: metric for metric in METRICS}


def of_source(source: str) -> list[Metric]:
    """The metrics one collector (or exporter) writes, in the table's order."""
    return [metric for metric in METRICS if metric.source == source]
