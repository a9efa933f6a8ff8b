"""The acceptance history: runs recorded in SQLite (safe for two writers, never written over
when it is not ours), compared figure by figure with ReFrame-style tolerances, degraded links
named, plan changes stated, and the comparison on the report's page and on the command line."""

from __future__ import annotations

import json
import multiprocessing
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from acceptance_sim import SimNode, SimulatedNetwork
from support.cli_output import result

from cluster_plan.acceptance import command
from cluster_plan.acceptance.compare import (
    DEFAULT_TOLERANCE,
    compare_figures,
    judge_figure,
    tolerance_from_plan,
)
from cluster_plan.acceptance.compare_html import trend_svg
from cluster_plan.acceptance.figures import figures_from_report
from cluster_plan.acceptance.history import History, HistoryError
from cluster_plan.acceptance.html import BAD, render_html
from cluster_plan.acceptance.report import validate_report
from cluster_plan.acceptance.runner import NETWORK_PHASES, AcceptanceRunner, RunOptions
from cluster_plan.acceptance.spec import spec_from_expanded
from cluster_plan.acceptance.tracking import attach, comparison_section
from cluster_plan.cli import main

RATE = 100e6  # the lab plan's 10 Gb/s links at rate_scale 0.01


@pytest.fixture
def expanded(expanded_lab: dict[str, Any]) -> dict[str, Any]:
    """The lab plan with a floor a link at 90 % of its rate still meets."""
    expanded_lab["acceptance"]["network"]["min_gbps"] = 8
    return expanded_lab


def simulated(expanded: dict[str, Any], rates: dict[str, float] | None = None) -> SimulatedNetwork:
    spec = spec_from_expanded(expanded)
    nodes = {n.name: SimNode(n.address) for net in spec.networks for n in net.nodes}
    for name, rate in (rates or {}).items():
        nodes[name].rate_bps = rate
    return SimulatedNetwork(nodes, seed=len(rates or {}))


def make_report(
    expanded: dict[str, Any], rates: dict[str, float] | None = None, nodes: list[str] | None = None
) -> dict[str, Any]:
    spec = spec_from_expanded(expanded, nodes=nodes, duration_s=2)
    options = RunOptions(probes=300, phases=NETWORK_PHASES)
    return AcceptanceRunner(spec, simulated(expanded, rates), options, lambda m: None).run()


def record(history: History, report: dict[str, Any], plan_hash: str = "p1") -> int:
    return history.record(report, plan_hash, "l1")


# -- the database ----------------------------------------------------------------------------
def test_a_run_is_recorded_with_every_figure(tmp_path: Path, expanded: dict[str, Any]) -> None:
    report = make_report(expanded)
    with History(tmp_path / "h.sqlite", create=True) as history:
        first, second = record(history, report), record(history, report, "p2")
        runs = history.runs("lab")
        stored = history.figures(second)
    assert [r.id for r in runs] == [second, first] and first < second
    assert runs[0].passed and runs[0].plan_hash == "p2" and runs[0].lock_hash == "l1"
    assert runs[0].criteria["min_gbps"] == 8
    pairs, probes, mtu = len(report["bandwidth"]), len(report["probes"]), len(report["mtu"])
    assert len(stored) == 2 * pairs + 2 * probes + mtu  # both directions of each pair
    assert sorted(stored, key=str) == sorted(figures_from_report(report), key=str)


def test_reading_never_creates_a_history(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match="no acceptance history there"):
        History(tmp_path / "none.sqlite")
    assert not (tmp_path / "none.sqlite").exists()


def _foreign(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes (text TEXT)")
    db.execute("INSERT INTO notes VALUES ('keep me')")
    db.commit()
    db.close()


def _newer(path: Path) -> None:
    History(path, create=True).db.close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 99")
    db.close()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.write_text("results of 2025\n"), "not an acceptance history"),
        (_foreign, "a SQLite database of something else"),
        (_newer, "layout 99"),
    ],
)
def test_a_foreign_or_unreadable_file_is_an_error_and_kept(
    tmp_path: Path, make: Any, message: str
) -> None:
    path = tmp_path / "h.sqlite"
    make(path)
    before = path.read_bytes()
    with pytest.raises(HistoryError, match=message) as caught:
        History(path, create=True)
    assert str(path) in str(caught.value)
    assert path.read_bytes() == before


def _record_many(path: str, report: dict[str, Any], count: int, tag: str) -> None:
    with History(Path(path), create=True) as history:
        for _ in range(count):
            history.record(report, tag, None)


def test_two_processes_record_at_once(tmp_path: Path, expanded: dict[str, Any]) -> None:
    """Both create the same new file and append to it at the same time: every run of both
    is kept, each with all its figures."""
    report, path, count = make_report(expanded), str(tmp_path / "h.sqlite"), 12
    context = multiprocessing.get_context("spawn")
    workers = [
        context.Process(target=_record_many, args=(path, report, count, tag)) for tag in "ab"
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
    assert [w.exitcode for w in workers] == [0, 0]
    with History(Path(path)) as history:
        runs = history.runs("lab")
        sizes = {len(history.figures(r.id)) for r in runs}
    assert len(runs) == 2 * count and len({r.id for r in runs}) == 2 * count
    assert sorted(r.plan_hash for r in runs) == ["a"] * count + ["b"] * count
    assert sizes == {len(figures_from_report(report))}


def test_reading_needs_no_write_lock(
    tmp_path: Path, expanded: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Listing runs while another process writes (or from a user who may only read the file)
    neither waits for nor takes the write lock."""
    path = tmp_path / "h.sqlite"
    with History(path, create=True) as history:
        history.record(make_report(expanded), "a", None)
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    monkeypatch.setattr("cluster_plan.acceptance.history.BUSY_TIMEOUT_S", 0.1)
    try:
        with History(path) as history:
            assert [r.plan_hash for r in history.runs("lab")] == ["a"]
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_a_run_id_to_compare_with_is_an_earlier_run_of_the_same_cluster(
    tmp_path: Path, expanded: dict[str, Any]
) -> None:
    path = tmp_path / "h.sqlite"
    with History(path, create=True) as history:
        ours = history.record(make_report(expanded), "a", None)
        theirs = history.record({**make_report(expanded), "cluster": "other"}, "b", None)
        later = history.record(make_report(expanded), "c", None)
        assert history.resolve(str(ours), "lab", before=later).id == ours
        with pytest.raises(HistoryError, match="of cluster other, not lab"):
            history.resolve(str(theirs), "lab", before=later)
        with pytest.raises(HistoryError, match="not earlier than run"):
            history.resolve(str(later), "lab", before=later)
        with pytest.raises(HistoryError, match="no run 99"):
            history.resolve("99", "lab")


def test_a_failed_write_is_an_error_naming_the_file(
    tmp_path: Path, expanded: dict[str, Any]
) -> None:
    """A write the database refuses half-way (a full disk, here a trigger) is a HistoryError
    naming the file, not a traceback, and leaves no half-recorded run."""
    path = tmp_path / "h.sqlite"
    History(path, create=True).db.close()
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TRIGGER full BEFORE INSERT ON figures BEGIN SELECT RAISE(ABORT, 'disk full'); END"
    )
    db.commit()
    db.close()
    with History(path, create=True) as history:
        with pytest.raises(HistoryError, match="cannot write the acceptance history: disk full"):
            history.record(make_report(expanded), "a", None)
        assert history.runs("lab") == []


# -- comparing -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("metric", "value", "reference", "outcome"),
    [
        ("bandwidth_gbps", 9.6, 10.0, "unchanged"),  # -4 %: within -5 %
        ("bandwidth_gbps", 9.4, 10.0, "degraded"),  # -6 %
        ("bandwidth_gbps", 13.0, 10.0, "unchanged"),  # no upper bound by default
        ("rtt_median_ms", 0.5, 0.05, "unchanged"),  # latency is not judged by default
        ("storage_read_mb_s", 90.0, 100.0, "degraded"),
        ("loss_pct", 0.1, 0.0, "changed"),  # no relative change from zero
        ("bandwidth_gbps", None, 10.0, "failed"),
        ("bandwidth_gbps", 9.0, None, "no_reference"),
    ],
)
def test_judge_figure_by_default(
    metric: str, value: float | None, reference: float | None, outcome: str
) -> None:
    assert judge_figure(metric, value, reference, DEFAULT_TOLERANCE)[1] == outcome


def test_tolerance_is_reframe_style_from_the_plan() -> None:
    tolerance = tolerance_from_plan(
        {"history": {"tolerance": {"latency": {"lower": None, "upper": 0.5}}}}
    )
    assert tolerance["bandwidth"] == {"lower": -0.05, "upper": None}
    assert judge_figure("rtt_median_ms", 0.08, 0.05, tolerance)[1] == "degraded"  # +60 %
    assert judge_figure("rtt_median_ms", 0.07, 0.05, tolerance)[1] == "unchanged"  # +40 %
    tight = {"bandwidth": {"lower": -0.01, "upper": 0.02}}  # ReFrame's (100, -0.01, 0.02)
    assert judge_figure("bandwidth_gbps", 103, 100, tight)[1] == "improved"
    assert judge_figure("bandwidth_gbps", 98.9, 100, tight)[1] == "degraded"
    assert judge_figure("bandwidth_gbps", 101, 100, tight)[1] == "unchanged"


def _run_and_compare(
    history: History, report: dict[str, Any], selector: str = "auto", plan_hash: str = "p1"
) -> dict[str, Any]:
    run = record(history, report, plan_hash)
    tolerance = tolerance_from_plan(None)
    attach(report, comparison_section(history, report, selector, tolerance, (plan_hash, "l1"), run))
    assert validate_report(report) == [], validate_report(report)
    return report


def test_clean_runs_are_unchanged_and_a_slower_node_is_degraded(
    tmp_path: Path, expanded: dict[str, Any]
) -> None:
    with History(tmp_path / "h.sqlite", create=True) as history:
        first = _run_and_compare(history, make_report(expanded))
        second = _run_and_compare(history, make_report(expanded))
        third = _run_and_compare(history, make_report(expanded, {"gpu02": 0.9 * RATE}))
    assert first["comparison"]["reference"] is None
    assert "no baseline or passed run" in first["comparison"]["notes"][0]
    outcomes = {r["outcome"] for r in second["comparison"]["figures"]}
    assert outcomes == {"unchanged"} and second["comparison"]["not_compared"] == []
    assert not [f for f in second["findings"] if f["kind"] == "degraded"]
    # the third run meets the plan's floor, yet gpu02's links got about 10 % slower
    assert third["passed"] and third["nodes_at_fault"] == []
    degraded = [f for f in third["findings"] if f["kind"] == "degraded"]
    assert [(f["node"], f["severity"]) for f in degraded] == [("gpu02", "warning")]
    rows = [r for r in third["comparison"]["figures"] if r["outcome"] == "degraded"]
    assert rows and all("gpu02" in (r["source"], r["target"]) for r in rows)
    assert all(r["metric"] == "bandwidth_gbps" and r["value"] >= 8 for r in rows)
    assert third["comparison"]["reference"]["run"] == 2  # the last passed run
    trend = third["comparison"]["trends"][0]
    assert [p["run"] for p in trend["points"]] == [1, 2, 3]


def test_one_slow_link_is_named_as_a_link(tmp_path: Path, expanded: dict[str, Any]) -> None:
    with History(tmp_path / "h.sqlite", create=True) as history:
        clean = make_report(expanded)
        record(history, clean)
        slow = json.loads(json.dumps(clean))
        row = slow["bandwidth"][0]
        row["forward_gbps"] = round(row["forward_gbps"] * 0.85, 4)
        _run_and_compare(history, slow)
    (finding,) = [f for f in slow["findings"] if f["kind"] == "degraded"]
    assert finding["node"] is None and finding["scope"] == "link"
    assert sorted(finding["pairs"][0]) == sorted([row["client"], row["server"]])
    assert f"{row['client']} -> {row['server']} bandwidth" in finding["message"]


def test_baseline_and_run_ids_choose_the_reference(
    tmp_path: Path, expanded: dict[str, Any]
) -> None:
    with History(tmp_path / "h.sqlite", create=True) as history:
        one = record(history, make_report(expanded))
        failing = make_report(expanded, {"gpu02": 0.5 * RATE})  # below the floor: failed
        two = record(history, failing)
        history.mark_baseline(one)
        assert history.resolve("baseline", "lab") == history.run(one)
        assert history.resolve("last-passed", "lab", before=two + 1) == history.run(one)
        assert history.resolve(str(two), "lab") == history.run(two)
        history.mark_baseline(two)
        assert [r.id for r in history.runs("lab") if r.baseline] == [two]
        with pytest.raises(HistoryError, match="no run 99"):
            history.resolve("99", "lab")
        with pytest.raises(HistoryError, match="a run id, last-passed or baseline"):
            history.resolve("yesterday", "lab")


def test_a_changed_plan_compares_only_what_both_runs_measured(
    tmp_path: Path, expanded: dict[str, Any]
) -> None:
    with History(tmp_path / "h.sqlite", create=True) as history:
        nodes = [n.name for n in spec_from_expanded(expanded).networks[0].nodes]
        record(history, make_report(expanded, nodes=nodes[:-1]))
        expanded["acceptance"]["network"]["min_gbps"] = 7
        report = _run_and_compare(history, make_report(expanded), plan_hash="p2")
    comparison = report["comparison"]
    new = nodes[-1]
    assert comparison["not_compared"]
    assert all(new in (g["source"], g["target"]) for g in comparison["not_compared"])
    assert {g["why"] for g in comparison["not_compared"]} == {"only this run measured it"}
    assert all(new not in (r["source"], r["target"]) for r in comparison["figures"])
    notes = " | ".join(comparison["notes"])
    assert "the plan changed since run 1" in notes and "min_gbps was 8 in run 1, is 7 now" in notes


def test_figures_only_the_earlier_run_measured_are_listed(expanded: dict[str, Any]) -> None:
    earlier = figures_from_report(make_report(expanded))
    now = [f for f in earlier if f.metric == "bandwidth_gbps"]  # latency and MTU not run now
    rows, gaps = compare_figures(now, earlier, DEFAULT_TOLERANCE)
    assert len(rows) == len(now)
    assert {g["metric"] for g in gaps} == {"rtt_median_ms", "loss_pct", "mtu_bytes"}
    assert {g["why"] for g in gaps} == {"only the earlier run measured it"}


# -- the page --------------------------------------------------------------------------------
def test_the_page_shows_the_change_heatmap_and_trends(
    tmp_path: Path, expanded: dict[str, Any]
) -> None:
    with History(tmp_path / "h.sqlite", create=True) as history:
        _run_and_compare(history, make_report(expanded))
        report = _run_and_compare(history, make_report(expanded, {"gpu02": 0.9 * RATE}))
    page = render_html(report)
    assert "Comparison with run 1" in page
    assert page.count('aria-label="bandwidth change compute"') == 1
    assert page.count("<polyline") == len(report["comparison"]["trends"]) > 0
    assert "Degraded figures over the last runs" in page
    # gpu02's row of the bandwidth change is red (degraded), the others are not
    red = f'fill="{BAD}"><title>'
    assert f"{red}gpu02 / " in page and f"{red}gpu01 / head01" not in page


def test_trend_svg_draws_the_floor_and_skips_failed_points() -> None:
    svg = trend_svg([{"run": 1, "value": 9.6}, {"run": 2, "value": None},
                     {"run": 3, "value": 8.7}], 8.0, "t")  # fmt: skip
    assert svg.count("<circle") == 2 and "stroke-dasharray" in svg
    assert trend_svg([{"run": 1, "value": None}], 8.0, "t") == ""


# -- the commands ----------------------------------------------------------------------------
def test_commands_record_list_mark_and_compare(
    tmp_path: Path,
    expanded: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    plan = tmp_path / "e.json"
    plan.write_text(json.dumps(expanded))
    out = tmp_path / "reports"
    rates: dict[str, float] = {}
    monkeypatch.setattr(command, "executor_for", lambda *a: simulated(expanded, rates))
    run = ["acceptance", "p.yml", "--expanded", str(plan), "--output-dir", str(out),
           "--phases", "bandwidth", "--duration", "1"]  # fmt: skip
    assert main(run) == 0
    assert main(run) == 0
    rates["gpu02"] = 0.9 * RATE
    capsys.readouterr()
    assert main(run) == 0  # passes the plan
    text = capsys.readouterr().out
    assert "degraded" in text and "gpu02" in text and "compared with run 2" in text
    report = json.loads((out / "acceptance.json").read_text())
    assert report["history"]["run"] == 3 and validate_report(report) == []

    history = ["acceptance", "history", "p.yml", "--expanded", str(plan), "--output-dir", str(out)]
    assert main([*history, "--format", "json"]) == 0
    listed = result(capsys.readouterr().out)
    assert [r["run"] for r in listed["runs"]] == [3, 2, 1]
    assert main([*history, "--mark-baseline", "1"]) == 0
    assert "run 1 is now the baseline" in capsys.readouterr().err

    html = tmp_path / "r.html"
    assert main(["report", str(out / "acceptance.json"), "--compare", "baseline",
                 "--output", str(html)]) == 0  # fmt: skip
    text = capsys.readouterr().out
    assert "compared with run 1 (baseline" in text and "bandwidth_gbps" in text
    assert "Comparison with run 1 (the baseline" in html.read_text()
    assert main(["report", str(out / "acceptance.json"), "--compare", "7"]) == 2
    assert "no run 7" in capsys.readouterr().err


def test_command_mistakes_are_usage_errors(
    tmp_path: Path, expanded: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tmp_path / "e.json"
    plan.write_text(json.dumps(expanded))
    base = ["--expanded", str(plan), "--output-dir", str(tmp_path)]
    assert main(["acceptance", "history", "p.yml", *base]) == 2
    assert "no acceptance history there" in capsys.readouterr().err
    assert main(["acceptance", "p.yml", "extra.yml", *base]) == 2
    assert main(["acceptance", "p.yml", "--mark-baseline", "1", *base]) == 2
    assert main(["acceptance", "p.yml", "--compare", "yesterday", *base]) == 2
    assert "a run id, last-passed or baseline" in capsys.readouterr().err
    assert main(["acceptance", "p.yml", "--compare", "99", *base]) == 2  # before measuring
    assert "no run 99" in capsys.readouterr().err
    (tmp_path / "history.sqlite").write_text("not a database\n")
    assert main(["acceptance", "p.yml", *base]) == 2  # refused before measuring anything
    assert "not an acceptance history" in capsys.readouterr().err
    report = make_report(expanded)
    (tmp_path / "acceptance.json").write_text(json.dumps(report))
    assert main(["report", str(tmp_path / "acceptance.json"), "--compare", "last-passed"]) == 2
    assert "names no history" in capsys.readouterr().err


# -- rows another program wrote, and paths that are no database file ---------------------------
WRONG_ROWS = {
    "passed-text": ("UPDATE runs SET passed = 'yes'", "run 1: passed 'yes' is not 0 or 1"),
    "criteria-not-json": ("UPDATE runs SET criteria = 'fast'", "run 1: not criteria (JSON)"),
    "criteria-a-list": ("UPDATE runs SET criteria = '[1]'", "run 1: criteria is not a JSON"),
    "criteria-nan": (
        """UPDATE runs SET criteria = '{"min_gbps": NaN}'""",
        "run 1: not criteria (JSON): $.min_gbps is NaN",
    ),
    "generated-at-not-a-time": (
        "UPDATE runs SET generated_at = 42",  # stored as the text '42' (the column's affinity)
        "run 1: generated_at '42' is not an ISO 8601 time",
    ),
    "cluster-a-blob": ("UPDATE runs SET plan_hash = x'00ff'", "run 1: plan_hash b'\\x00\\xff'"),
    "faults-negative": ("UPDATE runs SET faults = -1", "run 1: faults -1 is not a count"),
    "figure-text": (
        "UPDATE figures SET value = 'fast' WHERE rowid = 1",
        "run 1: a figure: value 'fast' is not a finite number",
    ),
    "figure-infinite": (
        "UPDATE figures SET floor = 9e999 WHERE rowid = 1",
        "run 1: a figure: floor inf is not a finite number",
    ),
}


@pytest.mark.parametrize("case", WRONG_ROWS)
def test_a_row_of_the_wrong_type_is_an_error_naming_run_and_column(
    case: str, tmp_path: Path, expanded: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    database = tmp_path / "history.sqlite"
    report = make_report(expanded)
    with History(database, create=True) as history:
        record(history, report)
        history.db.execute(WRONG_ROWS[case][0])
    report_file = tmp_path / "acceptance.json"
    report_file.write_text(json.dumps(report))
    plan = tmp_path / "e.json"
    plan.write_text(json.dumps(expanded))
    listing = ["acceptance", "history", "p.yml", "--expanded", str(plan)]
    listing += ["--history", str(database)]
    comparing = ["report", str(report_file), "--history", str(database), "--compare", "1"]
    argv = comparing if case.startswith("figure") else listing  # a listing reads no figure
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{database}: {WRONG_ROWS[case][1]}" in err and "Traceback" not in err


@pytest.mark.parametrize("kind", ["fifo", "symlink", "directory"])
def test_a_history_path_that_is_no_regular_file_is_refused(
    kind: str, tmp_path: Path, expanded: dict[str, Any]
) -> None:
    """In a process of its own, killed if it hangs: SQLite on a FIFO waits for ever."""
    real = tmp_path / "real.sqlite"
    with History(real, create=True) as history:
        record(history, make_report(expanded))
    database = tmp_path / "history.sqlite"
    if kind == "fifo":
        os.mkfifo(database)
    elif kind == "symlink":
        database.symlink_to(real)
    else:
        database.mkdir()
    plan = tmp_path / "e.json"
    plan.write_text(json.dumps(expanded))
    argv = ["acceptance", "history", "p.yml", "--expanded", str(plan), "--history", str(database)]
    done = subprocess.run(
        [sys.executable, "-m", "cluster_plan", *argv],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"{database}: this is a" in done.stderr and "not an acceptance history" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_number_that_is_not_finite_is_never_recorded(
    tmp_path: Path, expanded: dict[str, Any]
) -> None:
    report = make_report(expanded)
    with History(tmp_path / "h.sqlite", create=True) as history:
        bad = {**report, "criteria": {**report["criteria"], "min_gbps": float("nan")}}
        with pytest.raises(HistoryError, match=r"not recorded: .*\$\.min_gbps is nan"):
            record(history, bad)
        rows = [dict(r, forward_gbps=float("inf")) for r in report["bandwidth"]]
        with pytest.raises(HistoryError, match="value is inf, not a finite number"):
            record(history, {**report, "bandwidth": rows})
        assert history.runs("lab") == []
