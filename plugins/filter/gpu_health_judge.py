"""Filter ``gpu_health_judge``: a node's GPU report, from cluster_plan.gpu.health."""

from __future__ import annotations

from typing import Any

from cluster_plan.gpu.health import judge_node


def gpu_health_judge(
    facts: dict[str, Any],
    node: str,
    accelerators: Any = None,
    thresholds: Any = None,
    expected_driver_branch: Any = None,
    absent_gpus: str = "fail",
) -> dict[str, Any]:
    """nvml_facts output + the plan -> {node, gpus, findings, verdict}."""
    branch = None if expected_driver_branch in (None, "", "None") else int(expected_driver_branch)
    if absent_gpus not in ("fail", "skip"):
        raise ValueError(f"absent_gpus must be fail or skip, not {absent_gpus!r}")
    return judge_node(
        str(node),
        facts,
        accelerators or None,
        thresholds or None,
        branch,
        "skip" if absent_gpus == "skip" else "fail",
    )


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"gpu_health_judge": gpu_health_judge}
