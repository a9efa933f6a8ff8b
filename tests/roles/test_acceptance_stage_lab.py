"""Lab proof that site.yml's acceptance stage keeps its run in the acceptance history (issue
31): the converge's acceptance stage measured, so the report it left beside the history names
its run, and the history holds that run with the report's verdict and every figure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.lab_session import Converged, converged_lab, lab  # noqa: F401

from cluster_plan.acceptance.figures import figures_from_report
from cluster_plan.acceptance.history import History

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]


def test_the_acceptance_stage_records_its_run(converged_lab: Converged) -> None:  # noqa: F811
    converged_lab.require_runs()  # site.yml converged in this session, so the stage measured
    cluster = str(converged_lab.expanded["cluster"]["name"])
    report_dir = REPO / "reports" / cluster
    report = json.loads((report_dir / "acceptance.json").read_text())
    recorded = report["history"]
    assert Path(recorded["database"]) == (report_dir / "history.sqlite").resolve()
    with History(report_dir / "history.sqlite") as history:
        runs = {run.id: run for run in history.runs(cluster)}
        kept = history.figures(recorded["run"])
    run = runs[recorded["run"]]
    assert (run.passed, run.generated_at) == (report["passed"], report["generated_at"])
    assert {f.key for f in kept} == {f.key for f in figures_from_report(report)}
    assert kept, "the stage recorded no figure"
