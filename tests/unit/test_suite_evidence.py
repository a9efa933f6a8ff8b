"""The suite's own machinery (tests/support): the lab gate fails a run that cannot prove the
lab instead of skipping it, the phases plugin keeps every test's time by phase, and the end
of `make test` merges the runs, warns over budget and ends with `N passed, N failed`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import phase_report

TESTS = Path(__file__).resolve().parents[1]

# A stand-in for the lab: a tool no machine has, and a fixture named as the session's.
CONFTEST = """
import time
import pytest
import support.lab_session as lab_plugin
lab_plugin.TOOLS = ("no-such-lab-tool",)

def pytest_configure(config):
    config.addinivalue_line("markers", "lab: lab")
    config.addinivalue_line("markers", "lab_changes: changes the lab")

@pytest.fixture(scope="session")
def converged_lab():
    # busy for 0.3 s of its own CPU, as the converge keeps the machine busy
    started = time.process_time()
    while time.process_time() - started < 0.3:
        pass
"""
TESTS_FILE = """
import pytest

def test_plain():
    pass

@pytest.mark.lab
@pytest.mark.lab_changes
def test_changes_the_lab(converged_lab):
    pass
"""


def inner_run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_inner.py").write_text(TESTS_FILE)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CI", "CLUSTER_PLAN_"))}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args, str(tmp_path)],
        cwd=tmp_path,
        env={**clean, "PYTHONPATH": str(TESTS), **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_ci_fails_the_run_with_one_line_naming_what_the_lab_lacks(tmp_path: Path) -> None:
    for env in ({"CI": "true"}, {"CLUSTER_PLAN_REQUIRE_LAB": "1"}):
        run = inner_run(tmp_path, "-p", "support.lab_gate", **env)
        assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout
        assert "lab prerequisites missing: host tools no-such-lab-tool" in run.stdout
        assert "1 lab tests cannot run" in run.stdout and "passed" not in run.stdout


def test_an_opt_out_is_explicit_and_printed(tmp_path: Path) -> None:
    run = inner_run(tmp_path, "-p", "support.lab_gate", CI="true", CLUSTER_PLAN_SKIP_LAB="1")
    assert run.returncode == 0, run.stdout
    assert "lab tests: opted out (CLUSTER_PLAN_SKIP_LAB=1)" in run.stdout
    assert "lab tests: 1 skipped: CLUSTER_PLAN_SKIP_LAB=1" in run.stdout
    deselected = inner_run(tmp_path, "-p", "support.lab_gate", "-m", "not lab", CI="true")
    assert deselected.returncode == 0, deselected.stdout
    assert "lab tests: opted out (-m 'not lab')" in deselected.stdout


def test_a_developer_run_skips_with_the_reason_and_says_ci_would_fail(tmp_path: Path) -> None:
    run = inner_run(tmp_path, "-p", "support.lab_gate")
    assert run.returncode == 0, run.stdout
    assert "1 passed, 1 skipped" in run.stdout
    assert "the lab needs host tools no-such-lab-tool" in run.stdout
    assert "under CI or CLUSTER_PLAN_REQUIRE_LAB=1 this fails the run" in run.stdout


def test_phases_keep_every_test_and_carve_the_converge_out(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    run = inner_run(
        tmp_path, "-p", "support.phases", "--phases=x", CLUSTER_PLAN_REPORTS=str(reports)
    )
    assert run.returncode == 0, run.stdout
    summary = json.loads((reports / "x.phases.json").read_text())
    phases = summary["phases"]
    assert set(phases) == {"non-lab tests", "lab changes", "converge"}
    assert phases["converge"] >= 0.3  # the fixture's busy loop, a lower bound
    # the machine was busy at least that much in the converge's span, and it is charged there
    assert summary["busy_cpu_s"]["converge"] >= 0.25 and summary["cores"] == os.cpu_count()
    listed = (reports / "x.durations.txt").read_text()
    assert "lab changes / test_inner.py::test_changes_the_lab" in listed
    assert "non-lab tests / test_inner.py::test_plain" in listed
    assert "phases of this run (x)" in run.stdout


def _run_files(
    reports: Path,
    name: str,
    failures: int,
    phases: dict[str, float],
    slowest: float,
    busy: dict[str, float] | None = None,
) -> None:
    (reports / f"{name}.xml").write_text(
        f'<testsuites><testsuite tests="5" failures="{failures}" errors="0" skipped="1"/>'
        "</testsuites>"
    )
    summary = {"phases": phases, "busy_cpu_s": busy or {}, "cores": 2}
    (reports / f"{name}.phases.json").write_text(json.dumps(summary))
    (reports / f"{name}.durations.txt").write_text(f"header\n{slowest:9.2f} 0 0 0  p / {name}\n")


def test_the_end_of_make_test_merges_warns_over_budget_and_counts_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "budget.json").write_text(json.dumps({"seconds": {"converge": 10, "lab": 99}}))
    monkeypatch.setattr(phase_report, "REPORTS", tmp_path)
    monkeypatch.setattr(phase_report, "BUDGET", tmp_path / "budget.json")
    _run_files(tmp_path, "nonlab", 0, {"non-lab tests": 5.0}, slowest=2.0)
    _run_files(
        tmp_path, "labrun", 1, {"converge": 12.5, "lab": 3.0}, slowest=12.0, busy={"lab": 4.5}
    )
    code = phase_report.main(["--started", "100", "--tests-started", "130", "nonlab:0", "labrun:1"])
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert out[-1] == "7 passed, 1 failed, 2 skipped"  # CI reads the last line
    # the lab phase kept 4.5 CPU-seconds busy in 3 s: 1.5 of the 2 cores
    assert [line.split() for line in out if line.startswith("lab ")] == [
        ["lab", "3.0", "99", "1.5", "of", "2"]
    ]
    assert next(line.split() for line in out if line.startswith("converge"))[-1] == "10"
    warnings = [line for line in out if line.startswith("WARNING")]
    assert len(warnings) == 1 and "'converge' took 12 s, over its budget of 10 s" in warnings[0]
    merged = json.loads((tmp_path / "phases.json").read_text())
    assert merged["installs"] == 30 and merged["converge"] == 12.5
    assert (tmp_path / "durations.txt").read_text().splitlines()[1].endswith("/ labrun")


def test_a_run_stopped_before_its_tests_is_a_failure_and_no_tests_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "budget.json").write_text(json.dumps({"seconds": {}}))
    monkeypatch.setattr(phase_report, "REPORTS", tmp_path)
    monkeypatch.setattr(phase_report, "BUDGET", tmp_path / "budget.json")
    assert phase_report.main(["nothing:5"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "0 passed, 0 failed, 0 skipped"
    assert phase_report.main(["lab:4"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-2] == "the lab run stopped with exit status 4: counted as one failure"
    assert out[-1] == "0 passed, 1 failed, 0 skipped"
