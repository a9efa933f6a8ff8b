"""The alert rules, with the thresholds the plan knows: GPUs per node from the hardware
profiles, speed and MTU per port from the topology, NICs and networks, the backup schedule,
the acceptance thresholds and freshness, and Ceph pool fullness.

Every alert has a `severity` (warning or critical), a `summary` naming the host, link or pool,
a `description` saying what to do first and a `runbook_url` to its runbook (both from
cluster_plan.monitoring.runbooks); alerts about one node carry its `node` label, which is what
inhibition keys on (a node down silences its other alerts). Metrics are named through
cluster_plan.monitoring.metrics. docs/monitoring.md lists each rule."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from cluster_plan.monitoring import metrics as m
from cluster_plan.monitoring.runbooks import RUNBOOKS, runbook_url
from cluster_plan.plan.contract import ExpandedPlan, Host, Monitoring

Rule = dict[str, Any]

# Throttle reasons that cost a job speed for a reason outside it (the power cap is the
# board's normal limit under load: not an alert).
THROTTLE_REASONS = ("hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake")
# The labels a collector on the controller gets from its node's target; an alert about
# another node takes that node's own from its `up` series instead.
NODE_TARGET_LABELS = ("node_group", "rack", "pool", "teams")
# Each Ceph pool's use in percent, named (the rules, the dashboards and the status page ask it)
CEPH_POOL_USED_PCT = (
    f"{m.CEPH_POOL_STORED.name} / ({m.CEPH_POOL_STORED.name} + {m.CEPH_POOL_MAX_AVAIL.name}) "
    f"* on (pool_id) group_left (name) {m.CEPH_POOL_METADATA.name} * 100"
)


def _rule(alert: str, expr: str, severity: str, summary: str, wait: str) -> Rule:
    return {
        "alert": alert,
        "expr": expr,
        "for": wait,
        "labels": {"severity": severity},
        "annotations": {
            "summary": summary,
            "description": RUNBOOKS[alert],
            "runbook_url": runbook_url(alert),
        },
    }


def _planned(rule: Rule, **labels: str) -> Rule:
    """A rule of several with one alert name (one per node group, port or speed), told apart
    by the labels of what it checks and the plan's value: two rules with one name and the
    same labels are a mistake promtool's lint reports."""
    rule["labels"].update(labels)
    return rule


def _quote(value: str) -> str:
    """A PromQL string literal (names keep to the plan's grammars; quote anyway)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _alternatives(values: list[str]) -> str:
    """A regex matcher's value that matches exactly these strings (RE2, anchored by PromQL)."""
    return _quote("|".join(re.escape(v) for v in sorted(set(values))))


def _minutes(value: float) -> str:
    return f"{int(value)}m" if float(value).is_integer() else f"{int(value * 60)}s"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _about_node(expr: str) -> str:
    """An expression about other nodes, from a collector on the controller, with each node's
    own group, rack, pool and teams (from its `up` series) instead of the controller's."""
    labels = ", ".join(NODE_TARGET_LABELS)
    own = f'max by (node, {labels}) ({m.UP.name}{{job="node"}})'
    base = f"max without ({labels}, instance, job) ({expr})"
    return f"({base} * on (node) group_left ({labels}) ({own} * 0 + 1)) or on (node) {base}"


# ---- nodes and their ports ----------------------------------------------------------------


def time_references(plan: ExpandedPlan) -> list[str]:
    """The hosts the plan makes the site's own time reference: its NTP servers, when
    `cluster.time_reference` is set."""
    if not plan["cluster"].get("time_reference"):
        return []
    return sorted(plan["groups"].get("ntp_server", []))


def clock_unsynchronised(plan: ExpandedPlan) -> str:
    """From the clock collector (chronyd's own view, not the kernel's flag, which a server
    serving its own clock never sets): a host that tracks no real source, unless it is a site
    reference serving its own clock, which is what it promises."""
    references = time_references(plan)
    if not references:
        return f'{m.CLOCK_SYNCHRONISED.name}{{job="node"}} == 0'
    chosen = f'job="node",node=~{_alternatives(references)}'
    others = f'job="node",node!~{_alternatives(references)}'
    return (
        f"{m.CLOCK_SYNCHRONISED.name}{{{others}}} == 0 or "
        f"{m.CLOCK_SYNCHRONISED.name}{{{chosen}}} "
        f"+ {m.CLOCK_LOCAL_REFERENCE.name}{{{chosen}}} == 0"
    )


def node_rules(plan: ExpandedPlan, monitoring: Monitoring) -> list[Rule]:
    after = monitoring["alert_after_minutes"]
    wait = _minutes(after["node_down"])
    clock = _minutes(after["clock"])
    return [
        _rule(
            "NodeDown",
            f'{m.UP.name}{{job="node"}} == 0',
            "critical",
            "{{ $labels.node }} is down: its node_exporter has not answered for " + wait,
            wait,
        ),
        _rule(
            "ClockUnsynchronised",
            clock_unsynchronised(plan),
            "warning",
            "{{ $labels.node }}'s clock is not synchronised",
            clock,
        ),
        # The kernel's sync flag above stays set for a while after chronyd stops (and in the
        # lab's namespace nodes it is the host's): the unit's own state says it at once.
        _rule(
            "ClockServiceStopped",
            f"{m.NODE_SYSTEMD_UNIT_STATE.name}"
            '{job="node",name=~"chronyd?[.]service",state="active"} == 0',
            "warning",
            "chrony is not running on {{ $labels.node }}: its clock drifts unchecked",
            clock,
        ),
    ]


def port_speeds(plan: ExpandedPlan, host: Host) -> dict[str, float]:
    """Device -> planned Gb/s of a host's ports: the NIC's own speed_gbps, else its access
    switch's link speed (the dashboards colour their speed panels by it too)."""
    nics = plan["hardware"][host["hardware_profile"]].get("nics") or []
    own = {nic["name"]: nic["speed_gbps"] for nic in nics if nic.get("speed_gbps")}
    out = {}
    for iface in host["interfaces"].values():
        gbps = own.get(iface["device"]) or host["link_gbps"]
        if gbps:
            out[iface["device"]] = float(gbps)
    return out


def _port_plan(
    plan: ExpandedPlan,
) -> tuple[dict[tuple[str, str, float], set[str]], set[tuple[str, str, int]]]:
    """(node group, device, Gb/s) -> the racks of the hosts whose port runs at that speed, and
    (node group, device, MTU) of untagged networks."""
    speeds: dict[tuple[str, str, float], set[str]] = defaultdict(set)
    mtus: set[tuple[str, str, int]] = set()
    for host in plan["hosts"].values():
        for device, gbps in port_speeds(plan, host).items():
            speeds[(host["node_group"], device, gbps)].add(host["rack"] or "")
        for iface in host["interfaces"].values():
            if iface["vlan"] is None:
                mtus.add((host["node_group"], iface["device"], iface["mtu"]))
    return speeds, mtus


def _speed_rule(group: str, device: str, gbps: float, racks: set[str] | None, wait: str) -> Rule:
    """racks: only the group's hosts in these racks (their access switches differ in speed)."""
    where = f",rack=~{_alternatives(sorted(racks))}" if racks else ""
    selector = f'job="node",node_group={_quote(group)},device={_quote(device)}{where}'
    rule = _rule(
        "NicBelowPlanSpeed",
        f"{m.NODE_NETWORK_SPEED.name}{{{selector}}} < {_number(gbps * 1e9 / 8)}",
        "warning",
        "{{ $labels.device }} of {{ $labels.node }} runs at {{ $value | humanize }}B/s, "
        f"below the plan's {_number(gbps)} Gb/s",
        wait,
    )
    return _planned(rule, node_group=group, device=device, planned_gbps=_number(gbps))


def _mtu_rule(group: str, device: str, mtu: int, wait: str) -> Rule:
    selector = f'job="node",node_group={_quote(group)},device={_quote(device)}'
    rule = _rule(
        "NicWrongMtu",
        f"{m.NODE_NETWORK_MTU.name}{{{selector}}} != {mtu}",
        "warning",
        "{{ $labels.device }} of {{ $labels.node }} has MTU {{ $value }}, "
        + f"the plan says {mtu}",
        wait,
    )
    return _planned(rule, node_group=group, device=device, planned_mtu=str(mtu))


def port_rules(plan: ExpandedPlan, monitoring: Monitoring) -> list[Rule]:
    speeds, mtus = _port_plan(plan)
    wait = _minutes(monitoring["alert_after_minutes"]["nic"])
    rules = []
    for (group, device, gbps), racks in sorted(speeds.items()):
        # one speed for the device across the group: no rack filter
        alone = sum(1 for g, d, _ in speeds if (g, d) == (group, device)) == 1
        rules.append(_speed_rule(group, device, gbps, None if alone else racks - {""}, wait))
    rules += [_mtu_rule(group, device, mtu, wait) for group, device, mtu in sorted(mtus)]
    return rules


# ---- GPUs ---------------------------------------------------------------------------------


def _gpu_groups(plan: ExpandedPlan) -> dict[str, tuple[int, str]]:
    """Node group -> (NVIDIA GPUs per node, model), for groups with NVIDIA GPUs."""
    out = {}
    for host in plan["hosts"].values():
        accel = host["accelerators"]
        if accel and accel["kind"] == "gpu":
            out[host["node_group"]] = (accel["count"], accel["model"])
    return out


def gpu_rules(plan: ExpandedPlan, monitoring: Monitoring) -> list[Rule]:
    groups = _gpu_groups(plan)
    if not groups:
        return []
    gpu = plan["acceptance"]["gpu"]
    rules = [
        _planned(
            _rule(
                "GpuMissing",
                f'{m.GPU_PRESENT.name}{{job="node",node_group={_quote(group)}}} < {count}',
                "critical",
                "{{ $labels.node }} sees {{ $value }} of its " + f"{count} {model} GPUs",
                "2m",
            ),
            node_group=group,
            planned_gpus=str(count),
        )
        for group, (count, model) in sorted(groups.items())
    ]
    on_gpu_nodes = f'job="node",node_group=~{_alternatives(list(groups))}'
    throttle = _minutes(monitoring["throttle_minutes"])
    fatal = [str(x) for x in gpu["fail_on_xids"]]
    xid = f"{m.GPU_XID_EVENTS.name}{{xid=~{_alternatives(fatal)}}}"
    rules += [
        _rule(
            "GpuNvmlDown",
            f"{m.GPU_NVML_UP.name}{{{on_gpu_nodes}}} == 0",
            "critical",
            "NVML does not answer on {{ $labels.node }}: its GPUs cannot be seen",
            "5m",
        ),
        _rule(
            "GpuThrottled",
            f"{m.GPU_THROTTLE.name}{{reason=~{_alternatives(list(THROTTLE_REASONS))}}} == 1",
            "warning",
            "GPU {{ $labels.gpu }} of {{ $labels.node }} is throttled ({{ $labels.reason }}) "
            f"for {throttle}",
            throttle,
        ),
        _rule(
            "GpuTooHot",
            f"{m.GPU_TEMPERATURE.name} > {_number(gpu['max_temp_c'])}",
            "warning",
            "GPU {{ $labels.gpu }} of {{ $labels.node }} is at {{ $value }} °C, above the "
            f"plan's {_number(gpu['max_temp_c'])} °C",
            throttle,
        ),
        _rule(
            "GpuCriticalXid",
            f"({xid} - {xid} offset 1h) > 0 or ({xid} unless {xid} offset 1h)",
            "critical",
            "GPU {{ $labels.gpu }} of {{ $labels.node }} reported XID {{ $labels.xid }}",
            "0s",
        ),
        _rule(
            "GpuEccUncorrectable",
            f'{m.GPU_ECC_ERRORS.name}{{scope="volatile",kind="uncorrected"}} > '
            f"{gpu['max_ecc_uncorrected']}",
            "critical",
            "GPU {{ $labels.gpu }} of {{ $labels.node }} has {{ $value }} uncorrectable ECC "
            "errors since its driver loaded",
            "0s",
        ),
        _rule(
            "GpuRowRemapFailure",
            f'{m.GPU_REMAPPED_ROWS.name}{{kind="failure"}} > 0',
            "critical",
            "GPU {{ $labels.gpu }} of {{ $labels.node }} failed to remap a memory row",
            "0s",
        ),
        _rule(
            "GpuRowRemapPending",
            f'{m.GPU_REMAPPED_ROWS.name}{{kind="pending"}} > {gpu["max_remapped_rows_pending"]}',
            "warning",
            "GPU {{ $labels.gpu }} of {{ $labels.node }} has {{ $value }} row remaps pending",
            "0s",
        ),
    ]
    return rules


# ---- Ceph, Slurm, Kubernetes, backups, acceptance, collectors ------------------------------


def ceph_rules(plan: ExpandedPlan, monitoring: Monitoring) -> list[Rule]:
    if not plan["storage"].get("ceph"):
        return []
    cluster = plan["cluster"]["name"]
    full = monitoring["ceph_pool_full_pct"]
    return [
        _rule(
            "CephHealthWarning",
            f"{m.CEPH_HEALTH_STATUS.name} == 1",
            "warning",
            f"Ceph of cluster {cluster} reports HEALTH_WARN",
            "5m",
        ),
        _rule(
            "CephHealthError",
            f"{m.CEPH_HEALTH_STATUS.name} == 2",
            "critical",
            f"Ceph of cluster {cluster} reports HEALTH_ERR",
            "1m",
        ),
        _rule(
            "CephOsdDown",
            f"label_replace({m.CEPH_OSD_UP.name} * on (ceph_daemon) group_left (hostname) "
            f'{m.CEPH_OSD_METADATA.name}, "node", "$1", "hostname", "(.*)") == 0',
            "critical",
            "{{ $labels.ceph_daemon }} on {{ $labels.hostname }} is down",
            _minutes(monitoring["alert_after_minutes"]["ceph_osd"]),
        ),
        _rule(
            "CephPoolNearlyFull",
            f"{CEPH_POOL_USED_PCT} > {_number(full)}",
            "warning",
            'Ceph pool {{ $labels.name }} is {{ $value | printf "%.0f" }} % full '
            f"(the plan alerts at {_number(full)} %)",
            "5m",
        ),
    ]


def slurm_rules(plan: ExpandedPlan, monitoring: Monitoring) -> list[Rule]:
    scheduler = plan["scheduler"]
    if not scheduler or scheduler["type"] != "slurm":
        return []
    after = monitoring["alert_after_minutes"]
    state = m.SLURM_NODE_STATE.name + '{{state="{}"}} == 1'
    return [
        _rule(
            "SlurmNodeDown",
            _about_node(state.format("down")),
            "critical",
            "Slurm node {{ $labels.node }} is down in partition {{ $labels.partition }}",
            _minutes(after["slurm_down"]),
        ),
        _rule(
            "SlurmNodeDrained",
            _about_node(f'{m.SLURM_NODE_STATE.name}{{state=~"drained|draining"}} == 1'),
            "warning",
            "Slurm node {{ $labels.node }} is {{ $labels.state }} in partition "
            "{{ $labels.partition }}",
            _minutes(after["slurm_drained"]),
        ),
    ]


def kubernetes_rules(plan: ExpandedPlan, monitoring: Monitoring) -> list[Rule]:
    """From the Kubernetes collector on the first control plane: its series about other nodes
    take each node's own labels, as the Slurm collector's do."""
    scheduler = plan["scheduler"]
    if not scheduler or scheduler["type"] != "kubernetes":
        return []
    after = monitoring["alert_after_minutes"]
    not_ready = _minutes(after["k8s_not_ready"])
    apiserver = _minutes(after["k8s_apiserver"])
    ready = f'{m.K8S_NODE_READY.name}{{status="true"}} == 0'
    return [
        _rule(
            "KubernetesNodeNotReady",
            _about_node(f"max without (status) ({ready})"),
            "critical",
            "Kubernetes node {{ $labels.node }} is not Ready: its kubelet has not reported "
            f"Ready for {not_ready}",
            not_ready,
        ),
        _rule(
            "KubernetesAPIServerDown",
            f"{m.K8S_APISERVER_UP.name} == 0",
            "critical",
            "The Kubernetes API server does not answer /readyz with ok, asked from "
            "{{ $labels.node }} for " + apiserver,
            apiserver,
        ),
        # A device gone under running pods (a GPU fallen off the bus, a device plugin that
        # stopped serving): the kubelet offers fewer than its pods hold. The kubelet keeps a
        # stopped plugin's devices for 5 minutes before it drops them.
        _rule(
            "KubernetesAcceleratorsOverAllocated",
            _about_node(f"{m.K8S_NODE_ALLOCATED.name} > {m.K8S_NODE_ALLOCATABLE.name}"),
            "warning",
            "Pods on {{ $labels.node }} hold {{ $value }} {{ $labels.resource }}, more than "
            "the node offers now",
            "5m",
        ),
    ]


def backup_rules(plan: ExpandedPlan, monitoring: Monitoring) -> list[Rule]:
    backups = plan["backups"]
    hours = monitoring["backup_max_age_hours"]
    if not backups or hours is None:
        return []
    rules = [
        _rule(
            "BackupTooOld",
            f"time() - {m.BACKUP_LAST_SUCCESS.name} > {_number(hours * 3600)}",
            "warning",
            "The last backup of {{ $labels.node }} is {{ $value | humanizeDuration }} old; "
            f"the plan's schedule ({backups['schedule']}) allows {_number(hours)} h",
            "0s",
        )
    ]
    if backups["restore_test"]:
        rules.append(
            _rule(
                "BackupDrillFailed",
                f"{m.BACKUP_DRILL_PASSED.name} == 0",
                "warning",
                "The last restore drill of {{ $labels.node }}'s backup failed",
                "0s",
            )
        )
    return rules


def acceptance_rules(plan: ExpandedPlan, monitoring: Monitoring) -> list[Rule]:
    days = monitoring["acceptance_max_age_days"]
    cluster = plan["cluster"]["name"]
    return [
        _rule(
            "AcceptanceStale",
            f"time() - {m.ACCEPTANCE_LAST_RUN.name} > {_number(days * 86400)}",
            "warning",
            f"Acceptance of cluster {cluster} last ran "
            "{{ $value | humanizeDuration }} ago, more than the plan's " + f"{_number(days)} days",
            "0s",
        ),
        _rule(
            "AcceptanceFailed",
            f"{m.ACCEPTANCE_PASSED.name} == 0",
            "critical",
            f"The last acceptance run of cluster {cluster} failed",
            "0s",
        ),
        _rule(
            "CollectorFailing",
            f"{m.COLLECTOR_SUCCESS.name} == 0",
            "warning",
            "The {{ $labels.collector }} collector on {{ $labels.node }} failed its last run",
            "15m",
        ),
    ]


def alert_rules(plan: ExpandedPlan) -> dict[str, Any]:
    """The rule file: one group per subsystem."""
    monitoring = plan["monitoring"]
    if monitoring is None:
        raise ValueError("the plan has no monitoring section")
    groups = [
        ("nodes", node_rules(plan, monitoring) + port_rules(plan, monitoring)),
        ("gpus", gpu_rules(plan, monitoring)),
        ("ceph", ceph_rules(plan, monitoring)),
        ("slurm", slurm_rules(plan, monitoring)),
        ("kubernetes", kubernetes_rules(plan, monitoring)),
        ("backups", backup_rules(plan, monitoring)),
        ("acceptance", acceptance_rules(plan, monitoring)),
    ]
    return {"groups": [{"name": f"cluster-plan-{n}", "rules": r} for n, r in groups if r]}
