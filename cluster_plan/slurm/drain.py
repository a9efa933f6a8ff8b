"""Draining a Slurm node, waiting for its jobs and resuming it, with who drained it recorded.

One implementation for everything in this project that takes a node out of service:
`cluster-plan change` runs it through its executor (SSH, or the lab), the roles through the
action plugin `cluster_plan.cluster.slurm_drain` (the nvidia_driver role's rollout). Each
command is an argv handed to a `Run` callable, run on a host that has the Slurm client
tools, so the decisions below are tested with recorded `scontrol` output.

A drain made here carries its owner in Slurm's reason: `cluster-plan:<owner>: <why>` (Slurm
adds who set it and when). Only that owner lifts it. A node drained by anyone else, an
operator's reason or another owner's drain, is left drained with its reason untouched, and
said so: a driver upgrade inside a `change` neither overwrites the change's reason nor
resumes the node, and neither of them lifts an operator's drain. Its Kubernetes side,
cluster_plan.kubernetes.cordon, records the same owner text on a cordoned node.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from cluster_plan.slurm.commands import node_jobs_argv, node_state, oneliner_fields, show_node_argv

TAG = "cluster-plan:"
# What drains of each owner said before the tag existed, so that a drain left by an earlier
# version is still lifted by its owner.
LEGACY_PREFIXES = {
    "change": ("cluster-plan change:",),
    "nvidia_driver": ("nvidia_driver: upgrade to branch",),
}
# scontrol prints a reason with who set it and when: "bad DIMM [root@2026-11-30T16:53:38]"
_SETTER = re.compile(r"\s*\[[^\[\]]*@[^\[\]]*\]\s*$")
_OWNER = re.compile(r"^[a-z][a-z0-9_-]*$")

# argv -> (exit status, stdout, stderr), on a host with Slurm's client tools
Run = Callable[[list[str]], tuple[int, str, str]]


class DrainError(Exception):
    """Slurm could not be asked or told, or jobs stayed; the message says what was seen."""


@dataclass(frozen=True)
class NodeStatus:
    """A node as `scontrol show node --oneliner` shows it."""

    name: str
    state: str  # the base state: IDLE, MIXED, ALLOCATED, DOWN, ...
    flags: frozenset[str]  # DRAIN, NOT_RESPONDING, ...
    reason: str  # without Slurm's "[user@time]"

    @property
    def held(self) -> bool:
        """Drained, draining or failed: held out of service by someone's decision. A node that
        is only DOWN is Slurm's view of one that does not answer (it returns by itself on
        registering, ReturnToService=2): a drain holds it."""
        return bool({"DRAIN", "FAIL"} & self.flags) or self.state == "FAIL"


@dataclass(frozen=True)
class Decision:
    """What to do with a node: `action` "drain", "resume" (a Kubernetes cordon's: "cordon",
    "uncordon") or "none"; `held_by` the reason of a drain that is someone else's (left as it
    is)."""

    action: str
    message: str
    held_by: str | None = None


def reason_for(owner: str, why: str) -> str:
    """The reason a drain of `owner` carries."""
    if not _OWNER.match(owner):
        raise ValueError(f"owner {owner!r}: lower-case letters, digits, _ and - only")
    return f"{TAG}{owner}: {why}".strip()


def owner_of(reason: str) -> str | None:
    """Whose drain a reason says it is: the owner of a tagged (or earlier) drain of this
    project's, None for anyone else's."""
    text = reason.strip()
    if text.startswith(TAG):
        owner = text[len(TAG) :].split(":", 1)[0].strip()
        return owner if _OWNER.match(owner) else None
    return next((o for o, prefixes in LEGACY_PREFIXES.items() if text.startswith(prefixes)), None)


def parse_node(text: str, node: str) -> NodeStatus:
    """`scontrol show node --oneliner NODE` -> the node's status; DrainError when Slurm
    does not show that node."""
    for line in text.splitlines():
        fields = oneliner_fields(line.strip())
        if fields.get("NodeName") != node:
            continue
        state = node_state(fields.get("State", "UNKNOWN"))
        reason = _SETTER.sub("", fields.get("Reason", ""))
        return NodeStatus(node, state.base, state.flags, reason)
    raise DrainError(f"scontrol shows no node {node}: {text.strip()[:200] or 'no output'}")


def decide_drain(status: NodeStatus, owner: str) -> Decision:
    if not status.held:
        return Decision("drain", f"{status.name} drained by {owner}")
    if owner_of(status.reason) == owner:
        return Decision("none", f"{status.name} is drained by {owner} already")
    held = status.reason or status.state.lower()
    return Decision(
        "none",
        f"{status.name} is out of service already ({held}): left so, its reason kept; "
        f"{owner} does not resume it",
        held,
    )


def decide_resume(status: NodeStatus, owner: str) -> Decision:
    if not (status.held or status.state == "DOWN"):
        return Decision("none", f"{status.name} is not drained")
    if owner_of(status.reason) == owner:
        return Decision("resume", f"{status.name} resumed (its drain was {owner}'s)")
    held = status.reason or status.state.lower()
    return Decision(
        "none",
        f"{status.name} stays drained: {held!r} is not a drain of {owner}'s, whoever drained "
        "it resumes it",
        held,
    )


def _must(run: Run, argv: list[str]) -> str:
    rc, out, err = run(argv)
    if rc != 0:
        raise DrainError(f"`{' '.join(argv)}` exited {rc}: {(err or out).strip()[-400:]}")
    return out


def status(run: Run, node: str) -> NodeStatus:
    return parse_node(_must(run, show_node_argv(node)), node)


def drain(run: Run, node: str, owner: str, why: str, check: bool = False) -> Decision:
    """Drain the node for `owner` unless something holds it out of service already."""
    decision = decide_drain(status(run, node), owner)
    if decision.action == "drain" and not check:
        reason = reason_for(owner, why)
        _must(run, ["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"])
    return decision


def resume(run: Run, node: str, owner: str, check: bool = False) -> Decision:
    """Resume the node when its drain is `owner`'s; anyone else's is left."""
    decision = decide_resume(status(run, node), owner)
    if decision.action == "resume" and not check:
        _must(run, ["scontrol", "update", f"NodeName={node}", "State=RESUME"])
    return decision


def running_jobs(run: Run, node: str) -> list[str]:
    """The ids of the jobs on the node (running, completing or suspended there)."""
    return _must(run, node_jobs_argv(node)).split()


def wait_for_jobs(
    run: Run,
    node: str,
    timeout_s: float,
    requeue: bool = False,
    poll_s: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    say: Callable[[str], None] = lambda text: None,
) -> None:
    """Until no job runs on the node, at most `timeout_s`; with `requeue` the jobs still
    there are requeued first. DrainError naming the jobs when they stay."""
    jobs = running_jobs(run, node)
    if jobs:
        say(f"{node}: running job(s) {', '.join(jobs)}")
    if jobs and requeue:
        say(f"requeueing job(s) {', '.join(jobs)} from {node}")
        _must(run, ["scontrol", "requeue", ",".join(jobs)])
    deadline = clock() + timeout_s
    while jobs:
        if clock() >= deadline:
            raise DrainError(
                f"drain of {node}: still running job(s) {', '.join(jobs)} after {timeout_s:g} s"
            )
        sleep(poll_s)
        jobs = running_jobs(run, node)
