"""The panels of the Grafana dashboards, grouped in sections: what each shows (its PromQL,
legend, unit) and the plan's thresholds it is coloured by: a port's planned speed and MTU, the
GPUs per node, the GPU temperature limit, Ceph's pool fullness, the backup and acceptance ages.

A section is drawn for a scope, the label matcher of the nodes it shows (`rack`, `pool`,
`node_group`, one `node`; "" for the whole cluster), which node_exporter's series and the
node's own collectors' carry; the series the controller's Slurm collector writes about other
nodes carry the controller's labels, so those are joined on `node` with the scope's `up`
series (`slurm_scope`). cluster_plan.monitoring.dashboards chooses the sections of each
dashboard; cluster_plan.monitoring.grafana writes them as Grafana's JSON."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from cluster_plan.monitoring import metrics as m
from cluster_plan.monitoring.rules import CEPH_POOL_USED_PCT, THROTTLE_REASONS, port_speeds
from cluster_plan.plan.contract import ExpandedPlan, Host, Monitoring


@dataclass(frozen=True)
class Panel:
    title: str
    exprs: tuple[tuple[str, str], ...]  # (PromQL, legend)
    unit: str = "short"
    kind: str = "timeseries"  # or "stat"
    # (colour, from value) steps; the first starts at -infinity
    steps: tuple[tuple[str, float | None], ...] = (("green", None),)
    description: str = ""


@dataclass
class Section:
    title: str
    panels: list[Panel] = field(default_factory=list)


def quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _among(names: list[str]) -> str:
    """A `node` matcher for these nodes (names keep to the plan's hostname grammar)."""
    return "node=~" + quote("|".join(re.escape(n) for n in sorted(set(names))))


def selector(*matchers: str) -> str:
    present = [m for m in matchers if m]
    return "{" + ",".join(present) + "}" if present else ""


def _above(limit: float, colour: str = "red") -> tuple[tuple[str, float | None], ...]:
    return (("green", None), (colour, limit))


def below(limit: float) -> tuple[tuple[str, float | None], ...]:
    return (("red", None), ("green", limit))


# ---- sections -------------------------------------------------------------------------------


def node_section(scope: str) -> Section:
    up = selector('job="node"', scope)
    return Section(
        "Nodes and clocks",
        [
            Panel("Node exporters up", ((f"sum({m.UP.name}{up})", "up"),), kind="stat"),
            Panel(
                "Nodes down per node group",
                ((f"sum by (node_group) ({m.UP.name}{up} == bool 0)", "{{node_group}}"),),
                steps=_above(1),
            ),
            Panel(
                # chronyd's view (the clock collector): a site reference serving its own
                # clock counts as synchronised, as the ClockUnsynchronised rule judges it
                "Clock synchronised or the site's reference (1 = yes)",
                (
                    (
                        f"clamp_max(min by (node) ({m.CLOCK_SYNCHRONISED.name}{up})"
                        f" + min by (node) ({m.CLOCK_LOCAL_REFERENCE.name}{up}), 1)",
                        "{{node}}",
                    ),
                ),
                steps=below(1),
            ),
            Panel(
                "Clock offset",
                ((f"max by (node) (abs({m.NODE_TIMEX_OFFSET.name}{up}))", "{{node}}"),),
                unit="s",
            ),
        ],
    )


def _port_matcher(names: list[str], with_device: list[str], scope: str) -> str:
    """The scope's matcher when these are all its hosts with the device (one planned value
    for it), else the hosts by name."""
    return scope if sorted(names) == sorted(with_device) else _among(names)


def one_node_section(scope: str) -> Section:
    """node_section for the one node `scope` names: its exporter's state first, without the
    counts per node group, which mean nothing for one node."""
    up = selector('job="node"', scope)
    section = node_section(scope)
    exporter = Panel(
        "Node exporter up", ((f"{m.UP.name}{up}", "{{node}}"),), kind="stat", steps=below(1)
    )
    section.panels = [exporter, *section.panels[2:]]
    return section


def device_section(scope: str) -> Section:
    """One node's link speed and MTU per device; the node group dashboards carry the plan's
    value for each, which differs per group."""
    up = selector('job="node"', scope)
    return Section(
        "Network ports",
        [
            Panel(
                "Link speed per device",
                ((f"{m.NODE_NETWORK_SPEED.name}{up} * 8 / 1e9", "{{device}}"),),
                unit="Gbits",
            ),
            Panel(
                "MTU per device",
                ((m.NODE_NETWORK_MTU.name + selector(scope, 'device!="lo"'), "{{device}}"),),
                unit="bytes",
            ),
        ],
    )


def nic_section(plan: ExpandedPlan, hosts: list[Host], scope: str) -> Section:
    """A panel per device and planned speed, and per device and MTU (untagged networks)."""
    speeds: dict[tuple[str, float], list[str]] = defaultdict(list)
    mtus: dict[tuple[str, int], list[str]] = defaultdict(list)
    having: dict[str, list[str]] = defaultdict(list)  # device -> the hosts with it
    for host in hosts:
        for device, gbps in port_speeds(plan, host).items():
            speeds[(device, gbps)].append(host["hostname"])
        for iface in host["interfaces"].values():
            having[iface["device"]].append(host["hostname"])
            if iface["vlan"] is None:
                mtus[(iface["device"], iface["mtu"])].append(host["hostname"])
    panels = []
    for (device, gbps), names in sorted(speeds.items()):
        who = _port_matcher(names, having[device], scope)
        sel = selector('job="node"', who, f"device={quote(device)}")
        panels.append(
            Panel(
                f"{device} link speed (plan {gbps:g} Gb/s)",
                ((f"{m.NODE_NETWORK_SPEED.name}{sel} * 8 / 1e9", "{{node}}"),),
                unit="Gbits",
                steps=below(gbps),
                description="Red below the plan's speed; a link that is down reads -1 B/s.",
            )
        )
    for (device, mtu), names in sorted(mtus.items()):
        who = _port_matcher(names, having[device], scope)
        sel = selector('job="node"', who, f"device={quote(device)}")
        panels.append(
            Panel(
                f"{device} MTU (plan {mtu})",
                ((f"{m.NODE_NETWORK_MTU.name}{sel}", "{{node}}"),),
                unit="bytes",
                steps=(("red", None), ("green", float(mtu)), ("red", float(mtu) + 1)),
            )
        )
    return Section("Network ports against the plan", panels)


def gpu_section(plan: ExpandedPlan, scope: str) -> Section:
    sel = selector(scope)
    reasons = "|".join(THROTTLE_REASONS)
    max_temp = float(plan["acceptance"]["gpu"]["max_temp_c"])
    return Section(
        "GPUs",
        [
            Panel(
                "GPUs missing against the plan",
                (
                    (
                        f"max by (node) ({m.GPU_EXPECTED.name}{sel}) - "
                        f"max by (node) ({m.GPU_PRESENT.name}{sel})",
                        "{{node}}",
                    ),
                ),
                steps=_above(1),
                description="The plan's GPUs per node less those NVML answers for; a node "
                "whose NVML does not answer has no value here (see NVML answering).",
            ),
            Panel(
                "GPUs present and planned",
                (
                    (f"{m.GPU_PRESENT.name}{sel}", "{{node}} present"),
                    (f"{m.GPU_EXPECTED.name}{sel}", "{{node}} planned"),
                ),
            ),
            Panel(
                "NVML answering (1 = yes)",
                ((f"min by (node) ({m.GPU_NVML_UP.name}{sel})", "{{node}}"),),
                steps=below(1),
            ),
            Panel(
                f"GPU temperature (plan limit {max_temp:g} °C)",
                (
                    (
                        f"max by (node, gpu) ({m.GPU_TEMPERATURE.name}{sel})",
                        "{{node}} GPU {{gpu}}",
                    ),
                ),
                unit="celsius",
                steps=_above(max_temp),
            ),
            Panel(
                "GPU power per node",
                ((f"sum by (node) ({m.GPU_POWER.name}{sel})", "{{node}}"),),
                unit="watt",
            ),
            Panel(
                "GPUs throttled, by reason",
                (
                    (
                        f"sum by (node, reason) ({m.GPU_THROTTLE.name}"
                        + selector(scope, f"reason=~{quote(reasons)}")
                        + ")",
                        "{{node}} {{reason}}",
                    ),
                ),
                steps=_above(1),
                description="HW slowdown, SW/HW thermal and power brake; the power cap is "
                "a board's normal state under load and is left out.",
            ),
            Panel(
                "Uncorrectable ECC errors (volatile) and row remaps",
                (
                    (
                        f"sum by (node) ({m.GPU_ECC_ERRORS.name}"
                        + selector(scope, 'scope="volatile"', 'kind="uncorrected"')
                        + ")",
                        "{{node}} ECC uncorrected",
                    ),
                    (
                        f"sum by (node, kind) ({m.GPU_REMAPPED_ROWS.name}"
                        + selector(scope, 'kind=~"pending|failure"')
                        + ")",
                        "{{node}} rows {{kind}}",
                    ),
                ),
                steps=_above(1),
            ),
            Panel(
                "Last XID per GPU (0: none)",
                ((f"max by (node, gpu) ({m.GPU_XID_LAST.name}{sel})", "{{node}} GPU {{gpu}}"),),
                steps=_above(1),
                description="The last XID code the exporter saw on each GPU (every GPU has "
                f"the series); {m.GPU_XID_EVENTS.name} counts them per code, from "
                "a GPU's first XID on.",
            ),
        ],
    )


def slurm_scope(scope: str) -> Callable[[str], str]:
    """A metric of the controller's Slurm collector, about the nodes of the scope: each
    node's own target labels are on its `up` series."""
    if not scope:
        return lambda metric: metric
    up = selector('job="node"', scope)
    nodes = f"(max by (node) ({m.UP.name}{up}) * 0 + 1)"
    return lambda metric: f"({metric} * on (node) group_left () {nodes})"


def slurm_section(pick: Callable[[str], str], whole: bool) -> Section:
    """`pick` restricts a metric to the dashboard's scope."""
    panels = [
        Panel(
            "Slurm node states",
            (
                (
                    f"sum by (partition, state) ({pick(m.SLURM_NODE_STATE.name)}) > 0",
                    "{{partition}} {{state}}",
                ),
            ),
        ),
        Panel(
            "GPUs allocated by Slurm",
            (
                (f"sum({pick(m.SLURM_NODE_GPUS_ALLOCATED.name)})", "allocated"),
                (f"sum({pick(m.SLURM_NODE_GPUS.name)})", "configured"),
            ),
        ),
    ]
    if whole:
        panels += [
            Panel(
                "Pending jobs, by partition and account",
                (
                    (
                        f"sum by (partition, account) ({m.SLURM_JOBS_PENDING.name})",
                        "{{partition}} {{account}}",
                    ),
                ),
            ),
            Panel(
                "slurmdbd reachable (1 = yes)",
                ((f"min({m.SLURM_SLURMDBD_UP.name})", "slurmdbd"),),
                kind="stat",
                steps=below(1),
            ),
        ]
    return Section("Slurm", panels)


def ceph_section(monitoring: Monitoring, osd_hosts: list[str] | None) -> Section:
    """The whole cluster's Ceph (osd_hosts None), or the OSDs of these hosts."""
    if osd_hosts is not None:
        osds = (
            f"{m.CEPH_OSD_UP.name} * on (ceph_daemon) group_left (hostname) "
            f"{m.CEPH_OSD_METADATA.name}"
            f"{{hostname=~{quote('|'.join(map(re.escape, osd_hosts)))}}}"
        )
        return Section(
            "Ceph OSDs on these hosts",
            [Panel("OSDs up (1 = yes)", ((osds, "{{hostname}} {{ceph_daemon}}"),))],
        )
    full = float(monitoring["ceph_pool_full_pct"])
    return Section(
        "Ceph",
        [
            Panel(
                "Ceph health (0 ok, 1 warn, 2 error)",
                ((f"max({m.CEPH_HEALTH_STATUS.name})", "health"),),
                kind="stat",
                steps=(("green", None), ("orange", 1), ("red", 2)),
            ),
            Panel(
                "OSDs up and in the cluster",
                ((f"sum({m.CEPH_OSD_UP.name})", "up"), (f"count({m.CEPH_OSD_UP.name})", "total")),
                kind="stat",
            ),
            Panel(
                f"Pool use (plan alerts at {full:g} %)",
                ((CEPH_POOL_USED_PCT, "{{name}}"),),
                unit="percent",
                steps=_above(full),
            ),
        ],
    )


def state_section(monitoring: Monitoring, backups: bool) -> Section:
    days = float(monitoring["acceptance_max_age_days"])
    panels = [
        Panel(
            f"Age of the last acceptance run (plan: {days:g} days)",
            ((f"time() - max({m.ACCEPTANCE_LAST_RUN.name})", "age"),),
            unit="s",
            kind="stat",
            steps=_above(days * 86400, "orange"),
        ),
        Panel(
            "Last acceptance passed (1 = yes)",
            ((f"min({m.ACCEPTANCE_PASSED.name})", "passed"),),
            kind="stat",
            steps=below(1),
        ),
        Panel(
            "Drift findings",
            ((f"max({m.DRIFT_FINDINGS.name})", "findings"),),
            kind="stat",
            steps=_above(1, "orange"),
        ),
        Panel(
            "Collectors succeeding (1 = yes)",
            (
                (
                    f"min by (node, collector) ({m.COLLECTOR_SUCCESS.name})",
                    "{{node}} {{collector}}",
                ),
            ),
            steps=below(1),
        ),
    ]
    hours = monitoring["backup_max_age_hours"]
    if backups and hours is not None:
        panels += [
            Panel(
                f"Age of each node's last backup (plan: {hours:g} h)",
                (
                    (
                        f"time() - {m.BACKUP_LAST_SUCCESS.name}",
                        "{{node}}",
                    ),
                ),
                unit="s",
                steps=_above(hours * 3600, "orange"),
            ),
            Panel(
                "Last restore drill passed (1 = yes)",
                ((f"min by (node) ({m.BACKUP_DRILL_PASSED.name})", "{{node}}"),),
                steps=below(1),
            ),
        ]
    return Section("Acceptance, drift and backups", panels)
