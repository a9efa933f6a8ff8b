"""The Grafana dashboards a plan gets: an overview, one dashboard per rack, per pool and per
node group, and one per node with a `node` variable; each is the sections
(cluster_plan.monitoring.panels) that its hosts call for, written as Grafana's JSON model
(cluster_plan.monitoring.grafana). tests/monitoring/test_monitoring_dashboards.py runs every
panel's query against a real Prometheus."""

from __future__ import annotations

import re
from typing import Any

from cluster_plan.monitoring.grafana import NODE_VARIABLE, dashboard
from cluster_plan.monitoring.panels import (
    Section,
    ceph_section,
    device_section,
    gpu_section,
    nic_section,
    node_section,
    one_node_section,
    quote,
    selector,
    slurm_scope,
    slurm_section,
    state_section,
)
from cluster_plan.plan.contract import ExpandedPlan, Host, Monitoring


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
    scope = f"node={quote(NODE_VARIABLE)}"
    sections = [one_node_section(scope), device_section(scope)]
    if any(h["accelerators"] and h["accelerators"]["kind"] == "gpu" for h in _hosts(plan)):
        sections.append(gpu_section(plan, scope))
    if plan["scheduler"] and plan["scheduler"]["type"] == "slurm":
        sections.append(slurm_section(lambda metric: metric + selector(scope), False))
    return sections


def _hosts(plan: ExpandedPlan) -> list[Host]:
    return list(plan["hosts"].values())


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
            scope = f"{labels[kind]}={quote(value)}"
            out[f"{kind}-{_safe(value)}.json"] = dashboard(
                plan, kind, value, f"{words[kind]} {value}", _sections_for(plan, chosen, scope)
            )
    out["node.json"] = dashboard(plan, "node", "node", "node $node", node_sections(plan))
    return out
