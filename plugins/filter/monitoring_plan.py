"""Ansible filters over cluster_plan.monitoring: the plan's monitoring files, rebuilt from what
the inventory plugin gives every host (`cluster_plan`, each host's `plan_host`, the role
groups), and what each host runs. The decisions are the core's; this only adapts."""

from __future__ import annotations

from typing import Any

from cluster_plan.monitoring.role_view import monitoring_gpus, monitoring_rendering


class FilterModule:
    """Ansible filters; see each function's docstring."""

    def filters(self) -> dict[str, Any]:
        return {
            "monitoring_rendering": monitoring_rendering,
            "monitoring_gpus": monitoring_gpus,
        }
