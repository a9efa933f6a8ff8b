"""The session converge's runs, with stand-ins for the lab and site.yml: their order (the
hand changes after the idempotence and check-mode runs, the run that puts them right before
the gated re-run, the lost node after it, only after runs that passed), and nothing changed
by hand unless every planned value was read first. The lab's own session is the real proof
(tests/roles/test_stage_gate_lab.py and test_lost_node_lab.py read these runs)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import support.lab_session as session
from support import hand_changes, lost_node
from support.playbooks import Run

PLAN = Path("cluster.yml")


def test_every_check_is_read_before_any_change_and_each_change_made_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    said: list[tuple[str, str]] = []

    def read(_plan: Path, host: str, script: str, _env: Any) -> tuple[str, str | None]:
        said.append((host, script))
        return f"{host} {script}\n", None

    monkeypatch.setattr(hand_changes, "read", read)
    made = hand_changes.make(PLAN, {})
    checks = [(host, check) for host, _, check, _ in hand_changes.CHANGES]
    changes = [(host, change) for host, change, _, _ in hand_changes.CHANGES]
    assert said == checks + changes
    assert made.errors == [] and made.planned == {c: f"{c[0]} {c[1]}\n" for c in checks}


def test_a_check_that_cannot_be_read_leaves_the_lab_as_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    said: list[str] = []
    _, _, broken, _ = hand_changes.CHANGES[3]

    def read(_plan: Path, host: str, script: str, _env: Any) -> tuple[str, str | None]:
        said.append(script)
        return ("", f"{host}: {script}: exit 1") if script == broken else ("x", None)

    monkeypatch.setattr(hand_changes, "read", read)
    made = hand_changes.make(PLAN, {})
    assert said == [check for _, _, check, _ in hand_changes.CHANGES]  # no change made
    assert made.errors == [f"gpu02: {broken}: exit 1"]


def fake_playbooks(monkeypatch: pytest.MonkeyPatch, fails: set[int]) -> list[str]:
    """playbook() and hand_changes.make() stand-ins that log what ran, in order; the runs
    whose number (0-based, in the order started) is in `fails` exit 2."""
    log: list[str] = []

    def playbook(_plan: Path, _books: list[str], *extra: str, **_kw: Any) -> Run:
        number = sum(1 for entry in log if entry.startswith("site.yml"))
        log.append(" ".join(["site.yml", *extra]))
        code = 2 if number in fails else 0
        return Run(subprocess.CompletedProcess([], code, "PLAY RECAP", ""), 1.0)

    def make(_plan: Path, _env: Any) -> hand_changes.HandChanged:
        log.append("hand changes")
        return hand_changes.HandChanged()

    def lose_and_return(*_args: Any) -> lost_node.LostNode:
        log.append("lost node")
        return lost_node.LostNode("cpu01")

    monkeypatch.setattr(session, "playbook", playbook)
    monkeypatch.setattr(session.hand_changes, "make", make)
    monkeypatch.setattr(session.lost_node, "lose_and_return", lose_and_return)
    return log


def test_the_hand_changes_come_after_the_idempotence_and_check_runs_and_before_the_gated_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = fake_playbooks(monkeypatch, fails=set())
    runs = session.converge_runs({}, lambda _proc: None)
    full = " ".join(["site.yml", "-v", *session.FULL_RUN])
    check = " ".join(["site.yml", "--check", *session.FULL_RUN])
    assert log[0] == "site.yml" and sorted(log[1:3]) == sorted([full, check])
    assert log[3:] == ["hand changes", "site.yml", "site.yml", "lost node"]
    assert runs.hand is not None and runs.hand.run is not None and runs.hand.run.ok
    assert runs.gated is not None and runs.gated is not runs.hand.run
    assert runs.lost is not None and runs.lost.victim == "cpu01"


def test_no_gated_re_run_after_a_failed_repair(monkeypatch: pytest.MonkeyPatch) -> None:
    log = fake_playbooks(monkeypatch, fails={3})  # the run after the hand changes
    runs = session.converge_runs({}, lambda _proc: None)
    assert log[3:] == ["hand changes", "site.yml"]
    assert runs.hand is not None and runs.hand.run is not None and not runs.hand.run.ok
    assert runs.gated is None and runs.lost is None


def test_no_node_is_lost_after_a_failed_gated_re_run(monkeypatch: pytest.MonkeyPatch) -> None:
    log = fake_playbooks(monkeypatch, fails={4})
    runs = session.converge_runs({}, lambda _proc: None)
    assert log[3:] == ["hand changes", "site.yml", "site.yml"]
    assert runs.gated is not None and not runs.gated.ok and runs.lost is None
