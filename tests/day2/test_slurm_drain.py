"""The project's one drain (cluster_plan.slurm.drain): who drained a node is in its reason,
only that owner resumes it, and a node drained by anyone else is left drained and said so.
Decided from recorded `scontrol show node --oneliner` lines (slurm_nodes.py)."""

from __future__ import annotations

import pytest
from slurm_nodes import node_line

from cluster_plan.slurm import drain
from cluster_plan.slurm.drain import (
    DrainError,
    decide_drain,
    decide_resume,
    owner_of,
    parse_node,
    reason_for,
)


class Slurm:
    """scontrol and squeue as a controller answers them: a node's line, its jobs; every
    command kept."""

    def __init__(self, line: str, jobs: list[list[str]] | None = None) -> None:
        self.line = line
        self.jobs = jobs or [[]]
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str]) -> tuple[int, str, str]:
        self.calls.append(argv)
        if argv[:2] == ["scontrol", "show"]:
            return 0, self.line, ""
        if argv[0] == "squeue":
            ids = self.jobs.pop(0) if len(self.jobs) > 1 else self.jobs[0]
            return 0, "".join(f"{i}\n" for i in ids), ""
        return 0, "", ""

    @property
    def updates(self) -> list[list[str]]:
        return [c for c in self.calls if c[:2] == ["scontrol", "update"]]


def test_a_recorded_line_parses_with_state_flags_and_reason():
    idle = parse_node(node_line(), "cpu01")
    assert (idle.state, idle.flags, idle.reason) == ("IDLE", frozenset(), "")
    assert not idle.held
    drained = parse_node(node_line(state="IDLE+DRAIN", reason="bad DIMM in slot 3"), "cpu01")
    assert drained.flags == {"DRAIN"} and drained.reason == "bad DIMM in slot 3"
    assert drained.held
    down = parse_node(node_line(state="DOWN*", reason="Not responding"), "cpu01")
    assert down.state == "DOWN" and "NOT_RESPONDING" in down.flags and not down.held
    with pytest.raises(DrainError, match="no node gpu09"):
        parse_node(node_line(), "gpu09")


def test_the_reason_carries_its_owner():
    assert reason_for("nvidia_driver", "upgrade to branch 550") == (
        "cluster-plan:nvidia_driver: upgrade to branch 550"
    )
    assert owner_of("cluster-plan:change: upgrade") == "change"
    assert owner_of("cluster-plan:nvidia_driver: upgrade to branch 550") == "nvidia_driver"
    # what the drains said before the tag: still theirs to lift
    assert owner_of("cluster-plan change: removal") == "change"
    assert owner_of("nvidia_driver: upgrade to branch 550") == "nvidia_driver"
    assert owner_of("bad DIMM") is None and owner_of("") is None
    with pytest.raises(ValueError, match="owner"):
        reason_for("Bad Owner", "x")


def test_a_node_in_service_is_drained_with_the_owner_s_tag():
    slurm = Slurm(node_line(state="MIXED"))
    decision = drain.drain(slurm, "cpu01", "change", "upgrade")
    assert decision.action == "drain" and decision.held_by is None
    assert slurm.updates == [
        ["scontrol", "update", "NodeName=cpu01", "State=DRAIN",
         "Reason=cluster-plan:change: upgrade"],
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        ("IDLE+DRAIN", "bad DIMM in slot 3"),  # an operator's drain
        ("MIXED+DRAIN", "cluster-plan:change: upgrade"),  # a change's, around a converge
        ("DOWN+DRAIN", "power supply replaced, awaiting burn-in"),  # an operator's, down too
        ("IDLE+FAIL", "failing DIMM"),  # an operator's `State=FAIL`
    ],
    ids=["operator", "another-owner", "down-and-drained", "failed"],
)
def test_a_node_held_by_anyone_else_is_neither_redrained_nor_resumed(state, reason):
    slurm = Slurm(node_line(state=state, reason=reason))
    drained = drain.drain(slurm, "cpu01", "nvidia_driver", "upgrade to branch 550")
    assert drained.action == "none" and drained.held_by == reason
    assert "left so, its reason kept" in drained.message
    resumed = drain.resume(slurm, "cpu01", "nvidia_driver")
    assert resumed.action == "none" and resumed.held_by == reason
    assert "stays drained" in resumed.message
    assert slurm.updates == []  # the reason is never overwritten, the node never resumed


def test_the_owner_s_own_drain_is_resumed_and_a_second_drain_changes_nothing():
    slurm = Slurm(node_line(state="IDLE+DRAIN", reason="cluster-plan:nvidia_driver: x"))
    assert drain.drain(slurm, "cpu01", "nvidia_driver", "x").action == "none"
    assert slurm.updates == []
    assert drain.resume(slurm, "cpu01", "nvidia_driver").action == "resume"
    assert slurm.updates == [["scontrol", "update", "NodeName=cpu01", "State=RESUME"]]


def test_a_node_only_down_is_drained_so_that_it_does_not_come_back_by_itself():
    """Slurm's own DOWN (not answering) returns on registration: a failed health check's
    drain holds it, and its owner lifts it (DOWN and DRAIN at once) later."""
    slurm = Slurm(node_line(state="DOWN*", reason="Not responding"))
    assert drain.drain(slurm, "cpu01", "change", "failed its health check").action == "drain"
    assert drain.resume(slurm, "cpu01", "change").action == "none"  # Slurm's, not ours
    ours = Slurm(node_line(state="DOWN*+DRAIN", reason="cluster-plan:change: failed"))
    assert drain.resume(ours, "cpu01", "change").action == "resume"


def test_check_mode_decides_and_changes_nothing():
    slurm = Slurm(node_line())
    assert drain.drain(slurm, "cpu01", "change", "x", check=True).action == "drain"
    in_service = Slurm(node_line(state="IDLE+DRAIN", reason="cluster-plan:change: x"))
    assert drain.resume(in_service, "cpu01", "change", check=True).action == "resume"
    assert slurm.updates == [] and in_service.updates == []


def test_the_wait_for_jobs_is_bounded_and_names_them():
    clock = iter(range(100))
    slurm = Slurm(node_line(), jobs=[["41", "42"]])
    with pytest.raises(DrainError, match=r"still running job\(s\) 41, 42 after 3 s"):
        drain.wait_for_jobs(slurm, "cpu01", 3, sleep=lambda s: None,
                            clock=lambda: float(next(clock)))  # fmt: skip
    ended = Slurm(node_line(), jobs=[["41"], ["41"], []])
    drain.wait_for_jobs(ended, "cpu01", 60, sleep=lambda s: None)
    assert [c[0] for c in ended.calls] == ["squeue"] * 3


def test_requeue_moves_the_jobs_off_first():
    slurm = Slurm(node_line(), jobs=[["41", "42"], []])
    drain.wait_for_jobs(slurm, "cpu01", 60, requeue=True, sleep=lambda s: None)
    assert ["scontrol", "requeue", "41,42"] in slurm.calls


def test_slurm_that_cannot_answer_stops_the_drain():
    def failing(argv: list[str]) -> tuple[int, str, str]:
        return 1, "", "slurm_load_node error: Unable to contact slurm controller"

    with pytest.raises(DrainError, match="Unable to contact slurm controller"):
        drain.drain(failing, "cpu01", "change", "x")


def test_decisions_on_a_node_line_alone():
    operator = parse_node(node_line(state="IDLE+DRAIN", reason="bad DIMM"), "cpu01")
    assert decide_resume(operator, "change").held_by == "bad DIMM"
    assert decide_drain(parse_node(node_line(), "cpu01"), "change").action == "drain"
