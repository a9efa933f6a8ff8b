"""What the monitoring role installs, as plain data: the plan's monitoring files rebuilt from
what the inventory gives every host (`cluster_plan`, each host's `plan_host`, the role groups),
and what each host runs (filters of plugins/filter/monitoring_plan.py)."""

from __future__ import annotations

from typing import Any

from cluster_plan.monitoring.render import render
from cluster_plan.monitoring.targets import (
    ALERTMANAGER_PORT,
    CEPH_MGR_PORT,
    NODE_EXPORTER_PORT,
    PROMETHEUS_PORT,
    monitoring_server,
)
from cluster_plan.plan.findings import PlanError


def _expanded(
    cluster: dict[str, Any], plan_hosts: dict[str, Any], groups: dict[str, Any]
) -> dict[str, Any]:
    return {
        **cluster,
        "hosts": dict(plan_hosts),
        "groups": {k: list(v) for k, v in groups.items() if k not in ("all", "ungrouped")},
    }


def monitoring_rendering(
    cluster: dict[str, Any], plan_hosts: dict[str, Any], groups: dict[str, Any]
) -> dict[str, Any]:
    """What the role installs, as plain data: `server` (None: the plan has no monitoring, the
    role does nothing), `files` (path under the configuration directory -> text, as
    `cluster-plan monitoring render` writes them), the ports, and `problems`."""
    plan = _expanded(cluster, plan_hosts, groups)
    empty: dict[str, Any] = {"server": None, "server_address": "", "files": {}, "problems": ""}
    if plan.get("monitoring") is None:
        return empty
    server = monitoring_server(plan)  # type: ignore[arg-type]
    if server is None:
        return empty
    try:
        files = render(plan)  # type: ignore[arg-type]
    except PlanError as exc:
        return {**empty, "problems": exc.render()}
    return {
        "server": server["hostname"],
        "server_address": server["address"],
        "files": files,
        "problems": "",
        "node_exporter_port": NODE_EXPORTER_PORT,
        "prometheus_port": PROMETHEUS_PORT,
        "alertmanager_port": ALERTMANAGER_PORT,
        "ceph_mgr_port": CEPH_MGR_PORT,
        "retention_days": plan["monitoring"]["retention_days"],
        "ceph": bool((plan.get("storage") or {}).get("ceph")),
    }


def monitoring_gpus(host: dict[str, Any]) -> int:
    """How many NVIDIA GPUs the plan gives a host (0: no GPU collector there)."""
    accelerators = host.get("accelerators") or {}
    if accelerators.get("vendor") != "nvidia" or accelerators.get("kind") != "gpu":
        return 0
    return int(accelerators.get("count") or 0)
