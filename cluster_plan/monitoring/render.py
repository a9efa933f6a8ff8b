"""Every monitoring file of a plan, by path relative to the output directory."""

from __future__ import annotations

from pathlib import Path

import yaml

from cluster_plan.monitoring.alertmanager import alertmanager_config
from cluster_plan.monitoring.dashboards import dashboards
from cluster_plan.monitoring.rules import alert_rules
from cluster_plan.monitoring.targets import (
    RULES_FILE,
    monitoring_server,
    prometheus_config,
    target_files,
)
from cluster_plan.output_files import finite_json
from cluster_plan.plan.contract import ExpandedPlan
from cluster_plan.plan.findings import Finding, PlanError
from cluster_plan.views.rendered import write_tree

HEADER = "# Rendered by `cluster-plan monitoring render` from the cluster plan; do not edit.\n"


def _yaml(data: object) -> str:
    return HEADER + yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=100)


def render(plan: ExpandedPlan) -> dict[str, str]:
    """Path -> text. PlanError when the plan has no monitoring server."""
    monitoring = plan["monitoring"]
    if monitoring is None or monitoring_server(plan) is None:
        raise PlanError(
            [
                Finding(
                    "no-monitoring",
                    "the plan has no monitoring server: no host has the role monitoring_server",
                    ("node_groups",),
                    hint="add monitoring_server to the roles of a node group of one node",
                )
            ]
        )
    files = {
        "prometheus.yml": _yaml(prometheus_config(plan)),
        RULES_FILE: _yaml(alert_rules(plan)),
        "alertmanager.yml": _yaml(alertmanager_config(plan)),
        # Debian's prometheus unit reads its flags from /etc/default/prometheus
        "default/prometheus": (
            HEADER + f'ARGS="--storage.tsdb.retention.time={monitoring["retention_days"]}d"\n'
        ),
    }
    # allow_nan=False: a NaN from the plan is an error naming it, never a bare NaN in a file
    for path, groups in target_files(plan).items():
        files[path] = finite_json(groups, path, indent=2) + "\n"
    for name, board in dashboards(plan).items():  # for Grafana users to import
        where = f"dashboards/{name}"
        files[where] = finite_json(board, where, indent=2, ensure_ascii=False) + "\n"
    return files


def write(files: dict[str, str], directory: Path, plan: str = "") -> list[Path]:
    """Write the files under `directory`, so the directory is exactly this rendering; a
    folder holding anything else is refused (cluster_plan.views.rendered)."""
    return write_tree(files, directory, "monitoring render", plan)
