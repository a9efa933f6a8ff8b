"""The session lab converges in the background while the tests that need no lab run: the
order of a session's tests, the converge started by the first test that needs no lab, its
runs handed to the converged lab's tests, and a failed converge raised there (never lost in
its thread). The lab and site.yml are stand-ins here; the suite's own session is the real
proof (its converged-lab tests read these runs)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]

CONFTEST = """
import subprocess, time
import pytest
import support.lab_session as lab_plugin
from support.playbooks import Run

pytest_plugins = ["support.lab_session"]
lab_plugin.missing_prerequisites = lambda: []
EVENTS = []

def fake_runs(env, on_start):
    EVENTS.append("converge started")
    time.sleep(0.5)
    if env.get("FAKE_CONVERGE_FAILS"):
        raise RuntimeError("site.yml could not start")
    EVENTS.append("converge done")
    done = subprocess.CompletedProcess([], 0, "PLAY RECAP", "")
    return lab_plugin.Runs(Run(done, 0.5), Run(done, 0.5), Run(done, 0.5), Run(done, 0.5))

lab_plugin.converge_runs = fake_runs

@pytest.fixture(scope="session")
def lab():
    EVENTS.append("lab up")
    yield "the lab"
    EVENTS.append("lab down")
"""

TESTS_FILE = """
import pytest
from conftest import EVENTS

@pytest.mark.lab
@pytest.mark.lab_changes
def test_d_changes(converged_lab):
    EVENTS.append("changes")

@pytest.mark.lab
def test_c_converged(converged_lab):
    EVENTS.append("converged")
    assert converged_lab.first.ok and converged_lab.gated is not None
    assert converged_lab.check is not None and converged_lab.runs_s >= 0.5

def test_b_plain():
    EVENTS.append("plain")

@pytest.mark.lab
def test_a_bare(lab):
    EVENTS.append("bare")

def test_z_plain_again():
    EVENTS.append("plain again")

@pytest.mark.lab
def test_e_own_lab():
    EVENTS.append("own lab")

"""

REPORT = """
def pytest_sessionfinish(session):
    from conftest import EVENTS
    print("EVENTS=" + "|".join(EVENTS))
"""


def inner(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "conftest.py").write_text(CONFTEST + REPORT)
    (tmp_path / "test_inner.py").write_text(TESTS_FILE)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CI", "CLUSTER_PLAN_"))}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-s",
            "-v",
            *args,
            str(tmp_path),
        ],
        cwd=tmp_path,
        env={**clean, "PYTHONPATH": f"{tmp_path}:{TESTS}", **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def events(run: subprocess.CompletedProcess[str]) -> list[str]:
    line = next(ln for ln in run.stdout.splitlines() if "EVENTS=" in ln)
    return line.split("EVENTS=", 1)[1].split("|")


def ran(run: subprocess.CompletedProcess[str]) -> list[str]:
    return [ln.split("::")[1].split()[0] for ln in run.stdout.splitlines() if "::test_" in ln]


def test_bare_lab_then_no_lab_while_it_converges_then_converged_then_changes(
    tmp_path: Path,
) -> None:
    run = inner(tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert ran(run) == [
        "test_a_bare",
        "test_b_plain",
        "test_z_plain_again",
        "test_e_own_lab",
        "test_c_converged",
        "test_d_changes",
    ], run.stdout
    seen = events(run)
    # started by the first test that needs no lab, before it ran; not waited for by it
    assert seen[:4] == ["lab up", "bare", "converge started", "plain"], seen
    assert seen.index("converge done") < seen.index("converged") < seen.index("changes"), seen
    # a lab of its own (no session lab fixture) runs while the session lab converges
    assert seen.index("converge started") < seen.index("own lab") < seen.index("converged")
    assert seen[-1] == "lab down", seen
    assert "site.yml ran in the background" in run.stdout


@pytest.mark.parametrize("selection", [("-m", "not lab"), ("-k", "plain")], ids=["-m", "-k"])
def test_a_run_that_selects_no_lab_test_brings_up_no_lab_and_starts_no_converge(
    tmp_path: Path, selection: tuple[str, ...]
) -> None:
    """`-m 'not lab'` once still brought the session lab up and left a converge's
    ansible-playbook running after pytest ended: the order was decided before pytest's own
    selection dropped the lab tests."""
    run = inner(tmp_path, *selection)
    assert run.returncode == 0, run.stdout + run.stderr
    assert events(run) == ["plain", "plain again"], run.stdout


def test_a_failed_background_converge_fails_the_converged_tests_not_the_others(
    tmp_path: Path,
) -> None:
    run = inner(tmp_path, FAKE_CONVERGE_FAILS="1")
    assert run.returncode == 1, run.stdout
    assert "test_b_plain PASSED" in run.stdout and "test_a_bare PASSED" in run.stdout
    assert "test_c_converged ERROR" in run.stdout, run.stdout
    assert "RuntimeError: site.yml could not start" in run.stdout
    assert events(run)[-1] == "lab down"


def test_make_test_s_two_runs_split_the_session_between_them(tmp_path: Path) -> None:
    """`make test` runs the session lab's chain in one pytest and the rest beside it in
    another: each takes its side, in the session's order, and names what it left."""
    session = inner(tmp_path, CLUSTER_PLAN_SPLIT="session")
    assert session.returncode == 0, session.stdout + session.stderr
    assert ran(session) == ["test_a_bare", "test_c_converged", "test_d_changes"]
    seen = events(session)
    assert seen[:3] == ["lab up", "bare", "converge started"], seen
    assert seen.index("converge done") < seen.index("converged") < seen.index("changes")
    assert "3 passed, 3 deselected" in session.stdout, session.stdout
    assert "CLUSTER_PLAN_SPLIT=session: 3 tests left to the run on the beside side" in (
        session.stdout
    )

    beside = inner(tmp_path, CLUSTER_PLAN_SPLIT="beside")
    assert beside.returncode == 0, beside.stdout + beside.stderr
    # a lab of its own first, then the tests that need no lab; no session lab, no converge
    assert ran(beside) == ["test_e_own_lab", "test_b_plain", "test_z_plain_again"]
    assert events(beside) == ["own lab", "plain", "plain again"], beside.stdout
    assert "CLUSTER_PLAN_SPLIT=beside: 3 tests left to the run on the session side" in (
        beside.stdout
    )


def test_a_split_that_names_no_side_is_refused_in_words(tmp_path: Path) -> None:
    run = inner(tmp_path, CLUSTER_PLAN_SPLIT="both")
    assert run.returncode == 4, run.stdout + run.stderr
    assert "CLUSTER_PLAN_SPLIT='both': expected one of session, beside" in run.stderr
    assert "Traceback" not in run.stdout + run.stderr
