"""Acceptance over time: where a cluster's history lives, each run recorded in it, and the
report's comparison with an earlier run (section `comparison`, findings of kind `degraded`).

`cluster-plan acceptance` compares each new run with the cluster's baseline, or with its last
passed run when none is marked, then records it; `cluster-plan report --compare` compares a
report with any run; `cluster-plan acceptance history PLAN` lists the runs and marks one as
the baseline.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

from cluster_plan.acceptance.compare import (
    DEGRADED,
    compare_figures,
    degraded_findings,
    plan_notes,
)
from cluster_plan.acceptance.figures import figures_from_report
from cluster_plan.acceptance.history import DEFAULT_NAME, History, Run

AUTO = "auto"  # the baseline when one is marked, else the last passed run
TREND_RUNS = 10


def history_path(acceptance: Mapping[str, Any] | None, plan: Path | None, reports: Path) -> Path:
    """The plan's acceptance.history.database (relative to the plan's folder), else
    history.sqlite beside the reports."""
    chosen = ((acceptance or {}).get("history") or {}).get("database")
    if not chosen:
        return reports / DEFAULT_NAME
    path = Path(str(chosen)).expanduser()
    if not path.is_absolute() and plan is not None:
        path = plan.resolve().parent / path
    return path


def _reference(history: History, selector: str, cluster: str, this_run: int | None) -> Run | None:
    if selector != AUTO:
        return history.resolve(selector, cluster, before=this_run)
    return history.resolve("baseline", cluster) or history.resolve(
        "last-passed", cluster, before=this_run
    )


def _trends(
    history: History,
    report: Mapping[str, Any],
    rows: list[dict[str, Any]],
    this_run: int | None,
    runs: int,
) -> list[dict[str, Any]]:
    """Each degraded figure's value over the last runs (this one last)."""
    degraded = [r for r in rows if r["outcome"] == DEGRADED]
    keys = [(r["metric"], r["network"], r["source"], r["target"]) for r in degraded]
    past = history.series(report["cluster"], keys, this_run, runs)
    trends = []
    for row, key in zip(degraded, keys, strict=True):
        points = [{"run": run, "value": value} for run, value in past[key] if run != this_run]
        points.append({"run": this_run, "value": row["value"]})
        trends.append({**{k: row[k] for k in ("metric", "network", "source", "target", "unit",
                                               "floor")}, "points": points[-runs:]})  # fmt: skip
    return trends


def comparison_section(
    history: History,
    report: Mapping[str, Any],
    selector: str,
    tolerance: Mapping[str, Any],
    hashes: tuple[str | None, str | None] = (None, None),
    this_run: int | None = None,
) -> dict[str, Any]:
    """The report's `comparison`: the run compared with, each figure, what was not compared."""
    reference = _reference(history, selector, report["cluster"], this_run)
    base: dict[str, Any] = {"selector": selector, "tolerance": dict(tolerance)}
    if reference is None:
        wanted = "no baseline or passed run" if selector == AUTO else f"no {selector} run"
        return base | {"reference": None, "figures": [], "not_compared": [], "trends": [],
                       "notes": [f"{wanted} in the history before this one"]}  # fmt: skip
    rows, gaps = compare_figures(
        figures_from_report(report), history.figures(reference.id), tolerance
    )
    return base | {
        "reference": {
            "run": reference.id, "selector": selector, "generated_at": reference.generated_at,
            "passed": reference.passed, "baseline": reference.baseline,
        },
        "notes": plan_notes(report["criteria"], reference, *hashes),
        "figures": rows,
        "not_compared": gaps,
        "trends": _trends(history, report, rows, this_run, TREND_RUNS),
    }  # fmt: skip


def attach(report: MutableMapping[str, Any], comparison: Mapping[str, Any]) -> None:
    """Put the comparison and its degraded findings in the report (replacing earlier ones)."""
    report["comparison"] = dict(comparison)
    kept = [f for f in report["findings"] if f["kind"] != "degraded"]
    ref = comparison["reference"]
    new = degraded_findings(comparison["figures"], ref["run"]) if ref else []
    report["findings"] = kept + [f.as_dict() for f in new]
