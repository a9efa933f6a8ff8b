"""Grafana dashboards from the plan, as Grafana's JSON model (Grafana is not in Debian 12: a
user who runs one imports these files). An overview, one dashboard per rack, per pool and per
node group, and one per node with a `node` variable.

A scoped dashboard selects its nodes by the target label of its scope (`rack`, `pool`,
`node_group`), which node_exporter's series and the node's own collectors' carry; the series
the controller's Slurm collector writes about other nodes carry the controller's labels, so
those are joined on `node` with the scope's `up` series. Thresholds are the plan's: a port's planned
speed and MTU, the GPUs per node, the GPU temperature limit, Ceph's pool fullness, the backup
and acceptance ages. tests/monitoring/test_monitoring_dashboards.py runs every panel's query
against a real Prometheus."""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cluster_plan.monitoring import metrics as m
from cluster_plan.monitoring.rules import CEPH_POOL_USED_PCT, THROTTLE_REASONS
from cluster_plan.plan.contract import ExpandedPlan, Host, Monitoring

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
NODE_VARIABLE = "$node"
SCHEMA_VERSION = 36  # Grafana 9.x; later versions migrate it on import
NODES_QUERY = f'label_values({m.UP.name}{{job="node"}}, node)'  # the `node` variable's


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


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _among(names: list[str]) -> str:
    """A `node` matcher for these nodes (names keep to the plan's hostname grammar)."""
    return "node=~" + _quote("|".join(re.escape(n) for n in sorted(set(names))))


def _sel(*matchers: str) -> str:
    present = [m for m in matchers if m]
    return "{" + ",".join(present) + "}" if present else ""


def _above(limit: float, colour: str = "red") -> tuple[tuple[str, float | None], ...]:
    return (("green", None), (colour, limit))


def _below(limit: float) -> tuple[tuple[str, float | None], ...]:
    return (("red", None), ("green", limit))


# ---- sections -------------------------------------------------------------------------------


def node_section(scope: str) -> Section:
    up = _sel('job="node"', scope)
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
                steps=_below(1),
            ),
            Panel(
                "Clock offset",
                ((f"max by (node) (abs({m.NODE_TIMEX_OFFSET.name}{up}))", "{{node}}"),),
                unit="s",
            ),
        ],
    )


def _port_speeds(plan: ExpandedPlan, host: Host) -> dict[str, float]:
    """Device -> planned Gb/s: the NIC's own speed, else its access switch's link speed."""
    nics = plan["hardware"][host["hardware_profile"]].get("nics") or []
    own = {nic["name"]: nic["speed_gbps"] for nic in nics if nic.get("speed_gbps")}
    out = {}
    for iface in host["interfaces"].values():
        gbps = own.get(iface["device"]) or host["link_gbps"]
        if gbps:
            out[iface["device"]] = float(gbps)
    return out


def _port_matcher(names: list[str], with_device: list[str], scope: str) -> str:
    """The scope's matcher when these are all its hosts with the device (one planned value
    for it), else the hosts by name."""
    return scope if sorted(names) == sorted(with_device) else _among(names)


def nic_section(plan: ExpandedPlan, hosts: list[Host], scope: str) -> Section:
    """A panel per device and planned speed, and per device and MTU (untagged networks)."""
    speeds: dict[tuple[str, float], list[str]] = defaultdict(list)
    mtus: dict[tuple[str, int], list[str]] = defaultdict(list)
    having: dict[str, list[str]] = defaultdict(list)  # device -> the hosts with it
    for host in hosts:
        for device, gbps in _port_speeds(plan, host).items():
            speeds[(device, gbps)].append(host["hostname"])
        for iface in host["interfaces"].values():
            having[iface["device"]].append(host["hostname"])
            if iface["vlan"] is None:
                mtus[(iface["device"], iface["mtu"])].append(host["hostname"])
    panels = []
    for (device, gbps), names in sorted(speeds.items()):
        who = _port_matcher(names, having[device], scope)
        sel = _sel('job="node"', who, f"device={_quote(device)}")
        panels.append(
            Panel(
                f"{device} link speed (plan {gbps:g} Gb/s)",
                ((f"{m.NODE_NETWORK_SPEED.name}{sel} * 8 / 1e9", "{{node}}"),),
                unit="Gbits",
                steps=_below(gbps),
                description="Red below the plan's speed; a link that is down reads -1 B/s.",
            )
        )
    for (device, mtu), names in sorted(mtus.items()):
        who = _port_matcher(names, having[device], scope)
        sel = _sel('job="node"', who, f"device={_quote(device)}")
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
    sel = _sel(scope)
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
                steps=_below(1),
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
                        + _sel(scope, f"reason=~{_quote(reasons)}")
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
                        + _sel(scope, 'scope="volatile"', 'kind="uncorrected"')
                        + ")",
                        "{{node}} ECC uncorrected",
                    ),
                    (
                        f"sum by (node, kind) ({m.GPU_REMAPPED_ROWS.name}"
                        + _sel(scope, 'kind=~"pending|failure"')
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
    up = _sel('job="node"', scope)
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
                steps=_below(1),
            ),
        ]
    return Section("Slurm", panels)


def ceph_section(monitoring: Monitoring, osd_hosts: list[str] | None) -> Section:
    """The whole cluster's Ceph (osd_hosts None), or the OSDs of these hosts."""
    if osd_hosts is not None:
        osds = (
            f"{m.CEPH_OSD_UP.name} * on (ceph_daemon) group_left (hostname) "
            f"{m.CEPH_OSD_METADATA.name}"
            f"{{hostname=~{_quote('|'.join(map(re.escape, osd_hosts)))}}}"
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
            steps=_below(1),
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
            steps=_below(1),
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
                steps=_below(1),
            ),
        ]
    return Section("Acceptance, drift and backups", panels)


# ---- dashboards -----------------------------------------------------------------------------


def _sections_for(plan: ExpandedPlan, hosts: list[Host], scope: str) -> list[Section]:
    """The sections of a dashboard over these hosts, `scope` their label matcher ("" for the
    overview: every host)."""
    names = {h["hostname"] for h in hosts}
    sections = [node_section(scope), nic_section(plan, hosts, scope)]
    if any(h["accelerators"] and h["accelerators"]["kind"] == "gpu" for h in hosts):
        sections.append(gpu_section(plan, scope))
    scheduler = plan["scheduler"]
    slurm_nodes = names & set(plan["groups"].get("slurm_compute", []))
    if scheduler and scheduler["type"] == "slurm" and slurm_nodes:
        sections.append(slurm_section(slurm_scope(scope), not scope))
    if plan["storage"].get("ceph"):
        osds = sorted(names & set(plan["groups"].get("ceph_osd", [])))
        if not scope:
            sections.append(ceph_section(_monitoring(plan), None))
        elif osds:
            sections.append(ceph_section(_monitoring(plan), osds))
    if not scope:
        sections.append(state_section(_monitoring(plan), bool(plan["backups"])))
    return [s for s in sections if s.panels]


def _monitoring(plan: ExpandedPlan) -> Monitoring:
    monitoring = plan["monitoring"]
    if monitoring is None:
        raise ValueError("the plan has no monitoring section")
    return monitoring


def node_sections(plan: ExpandedPlan) -> list[Section]:
    """The per-node dashboard: every panel for the node the `node` variable names. Its
    ports' plan differs per node group: the group dashboards carry those thresholds."""
    scope = f"node={_quote(NODE_VARIABLE)}"
    up = _sel('job="node"', scope)
    sections = [node_section(scope)]
    sections[0].panels = sections[0].panels[2:]  # per-group counts mean nothing for one node
    sections[0].panels.insert(
        0,
        Panel(
            "Node exporter up", ((f"{m.UP.name}{up}", "{{node}}"),), kind="stat", steps=_below(1)
        ),
    )
    sections.append(
        Section(
            "Network ports",
            [
                Panel(
                    "Link speed per device",
                    ((f"{m.NODE_NETWORK_SPEED.name}{up} * 8 / 1e9", "{{device}}"),),
                    unit="Gbits",
                ),
                Panel(
                    "MTU per device",
                    ((m.NODE_NETWORK_MTU.name + _sel(scope, 'device!="lo"'), "{{device}}"),),
                    unit="bytes",
                ),
            ],
        )
    )
    if any(h["accelerators"] and h["accelerators"]["kind"] == "gpu" for h in _hosts(plan)):
        sections.append(gpu_section(plan, scope))
    if plan["scheduler"] and plan["scheduler"]["type"] == "slurm":
        sections.append(slurm_section(lambda metric: metric + _sel(scope), False))
    return sections


def _hosts(plan: ExpandedPlan) -> list[Host]:
    return list(plan["hosts"].values())


def _uid(cluster: str, kind: str, name: str) -> str:
    """Grafana's uid: at most 40 characters, stable for a plan."""
    uid = f"cp-{cluster}-{kind}-{name}"
    if len(uid) <= 40 and re.fullmatch(r"[A-Za-z0-9_-]+", uid):
        return uid
    return "cp-" + hashlib.sha256(uid.encode()).hexdigest()[:32]


def _panel_json(panel: Panel, pid: int, x: int, y: int) -> dict[str, Any]:
    return {
        "id": pid,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": DATASOURCE,
        "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": e, "legendFormat": lg}
            for i, (e, lg) in enumerate(panel.exprs)
        ],
        "fieldConfig": {
            "defaults": {
                "unit": panel.unit,
                "thresholds": {
                    "mode": "absolute",
                    "steps": [{"color": c, "value": v} for c, v in panel.steps],
                },
                "color": {"mode": "thresholds" if panel.kind == "stat" else "palette-classic"},
                "custom": {} if panel.kind == "stat" else {"thresholdsStyle": {"mode": "line"}},
            },
            "overrides": [],
        },
        "options": {"legend": {"displayMode": "table", "placement": "right"}}
        if panel.kind == "timeseries"
        else {"reduceOptions": {"calcs": ["lastNotNull"]}, "colorMode": "background"},
    }


def _variables(with_node: bool) -> list[dict[str, Any]]:
    variables: list[dict[str, Any]] = [
        {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus"}
    ]
    if with_node:
        variables.append(
            {
                "name": "node",
                "label": "Node",
                "type": "query",
                "datasource": DATASOURCE,
                "query": {"query": NODES_QUERY, "refId": "node"},
                "definition": NODES_QUERY,
                "refresh": 2,
                "sort": 1,
            }
        )
    return variables


def dashboard(
    plan: ExpandedPlan, kind: str, name: str, title: str, sections: list[Section]
) -> dict[str, Any]:
    """Grafana's dashboard JSON: a row per section, its panels two to a line."""
    cluster = plan["cluster"]["name"]
    panels: list[dict[str, Any]] = []
    y = 0
    pid = 1
    for section in sections:
        panels.append(
            {
                "id": pid,
                "type": "row",
                "title": section.title,
                "collapsed": False,
                "panels": [],
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
            }
        )
        pid, y = pid + 1, y + 1
        for i, panel in enumerate(section.panels):
            panels.append(_panel_json(panel, pid, 12 * (i % 2), y + 8 * (i // 2)))
            pid += 1
        y += 8 * ((len(section.panels) + 1) // 2)
    return {
        "uid": _uid(cluster, kind, name),
        "title": f"{cluster}: {title}",
        "tags": ["cluster-plan", cluster, kind],
        "timezone": "browser",
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "editable": True,
        "refresh": "1m",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": _variables(kind == "node")},
        "panels": panels,
    }


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def dashboards(plan: ExpandedPlan) -> dict[str, dict[str, Any]]:
    """Path (under dashboards/) -> dashboard JSON."""
    hosts = _hosts(plan)
    out = {
        "overview.json": dashboard(
            plan, "overview", "all", "overview", _sections_for(plan, hosts, "")
        )
    }
    scopes: dict[str, dict[str, list[Host]]] = {"rack": {}, "pool": {}, "group": {}}
    for host in hosts:
        for kind, value in (
            ("rack", host["rack"]),
            ("pool", host["pool"]),
            ("group", host["node_group"]),
        ):
            if value:
                scopes[kind].setdefault(value, []).append(host)
    words = {"rack": "rack", "pool": "pool", "group": "node group"}
    labels = {"rack": "rack", "pool": "pool", "group": "node_group"}  # the targets' labels
    for kind, members in scopes.items():
        for value, chosen in sorted(members.items()):
            scope = f"{labels[kind]}={_quote(value)}"
            out[f"{kind}-{_safe(value)}.json"] = dashboard(
                plan, kind, value, f"{words[kind]} {value}", _sections_for(plan, chosen, scope)
            )
    out["node.json"] = dashboard(plan, "node", "node", "node $node", node_sections(plan))
    return out


def panel_exprs(board: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, PromQL) of every query of a dashboard."""
    return [
        (panel["title"], target["expr"])
        for panel in board["panels"]
        for target in panel.get("targets", [])
    ]
