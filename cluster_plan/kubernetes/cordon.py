"""Cordoning a Kubernetes node and uncordoning it, with who cordoned it recorded: the
Kubernetes side of the project's one drain (cluster_plan.slurm.drain).

`cluster-plan change` runs it through its executor, the roles through the action plugin
`cluster_plan.cluster.k8s_cordon` (the nvidia_driver role's rollout). Each command is an argv
handed to a `Run` callable, run on a host whose kubectl reaches the cluster, so the decisions
below are tested with recorded `kubectl get node -o json` output.

Kubernetes keeps no reason with a cordon, so a cordon made here carries its owner in an
annotation of the node, ANNOTATION, whose value is the text a Slurm drain's reason would be
(`cluster-plan:<owner>: <why>`). Only that owner uncordons. A node cordoned by anyone else,
an operator (no annotation) or another owner, is left cordoned, its annotation untouched,
and said so. Evicting the pods (`kubectl drain`) is the callers' next step, after the cordon.

Each side is one write, a merge patch of the annotation and spec.unschedulable together that
carries the resourceVersion of the node as read: a node changed by anyone between the read
and the write (an operator's `kubectl cordon`) is refused by the API server with a Conflict,
and the node is read and decided again, ATTEMPTS times at most; so an operator's cordon is
never taken for ours, nor lifted as ours.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cluster_plan.slurm.drain import Decision, DrainError, Run, owner_of, reason_for

ANNOTATION = "cluster-plan.io/cordoned-by"
ATTEMPTS = 3  # reads and guarded writes before a node that keeps changing is an error
# how kubectl reports a write refused for its stale resourceVersion (HTTP 409)
_CONFLICT = ("(Conflict)", "the object has been modified")


@dataclass(frozen=True)
class NodeStatus:
    """A node as `kubectl get node NODE -o json` shows it."""

    name: str
    unschedulable: bool  # spec.unschedulable: cordoned
    cordoned_by: str  # the ANNOTATION's value, "" without it
    resource_version: str  # metadata.resourceVersion: the guard of a write

    @property
    def held_by(self) -> str:
        """Who holds the node cordoned, in words, for a cordon that is not ours."""
        return self.cordoned_by or "cordoned, no owner recorded"


def field_at(obj: Any, *keys: str) -> Any:
    """obj[k1][k2]... of kubectl's JSON, None where a key or an object is missing."""
    for key in keys:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def kubectl_json(text: str, what: str) -> Any:
    """What `kubectl get WHAT -o json` printed, parsed; DrainError when it is not JSON."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DrainError(
            f"kubectl get {what}: not JSON ({exc.msg} at line {exc.lineno}): "
            f"{text.strip()[:200] or 'no output'}"
        ) from None


def parse_node(text: str, node: str) -> NodeStatus:
    """`kubectl get node NODE -o json` -> the node's status; DrainError when the text is not
    that node as JSON."""
    obj = kubectl_json(text, f"node {node}")
    if field_at(obj, "kind") != "Node" or field_at(obj, "metadata", "name") != node:
        raise DrainError(f"kubectl shows no node {node}: {text.strip()[:200]}")
    unschedulable = field_at(obj, "spec", "unschedulable")
    annotations = field_at(obj, "metadata", "annotations") or {}
    if not isinstance(unschedulable, (bool, type(None))) or not isinstance(annotations, dict):
        raise DrainError(
            f"kubectl get node {node}: spec.unschedulable {unschedulable!r}, "
            f"metadata.annotations {str(annotations)[:200]}: not a node's"
        )
    version = field_at(obj, "metadata", "resourceVersion")
    if not isinstance(version, str) or not version:
        raise DrainError(f"kubectl get node {node}: no metadata.resourceVersion to guard a write")
    return NodeStatus(node, bool(unschedulable), str(annotations.get(ANNOTATION, "")), version)


def decide_cordon(status: NodeStatus, owner: str) -> Decision:
    if not status.unschedulable:
        return Decision("cordon", f"{status.name} cordoned by {owner}")
    if owner_of(status.cordoned_by) == owner:
        return Decision("none", f"{status.name} is cordoned by {owner} already")
    return Decision(
        "none",
        f"{status.name} is cordoned already ({status.held_by}): left so; {owner} does not "
        "uncordon it",
        status.held_by,
    )


def decide_uncordon(status: NodeStatus, owner: str) -> Decision:
    ours = owner_of(status.cordoned_by) == owner
    if not status.unschedulable:
        # our record left behind (an uncordon whose annotation removal failed) goes, so that
        # an operator's later cordon is never taken for ours
        if ours:
            return Decision("uncordon", f"{status.name} is schedulable; {owner}'s record removed")
        return Decision("none", f"{status.name} is not cordoned")
    if ours:
        return Decision("uncordon", f"{status.name} uncordoned (its cordon was {owner}'s)")
    return Decision(
        "none",
        f"{status.name} stays cordoned: {status.held_by!r} is not a cordon of {owner}'s, "
        "whoever cordoned it uncordons it",
        status.held_by,
    )


def _failed(argv: list[str], rc: int, out: str, err: str) -> DrainError:
    return DrainError(f"`{' '.join(argv)}` exited {rc}: {(err or out).strip()[-400:]}")


def _must(run: Run, argv: list[str]) -> str:
    rc, out, err = run(argv)
    if rc != 0:
        raise _failed(argv, rc, out, err)
    return out


def status(run: Run, node: str) -> NodeStatus:
    return parse_node(_must(run, ["kubectl", "get", "node", node, "-o", "json"]), node)


def patch_argv(status: NodeStatus, record: str | None, unschedulable: bool | None) -> list[str]:
    """One merge patch of our annotation (None: removed) and spec.unschedulable (None:
    removed, as `kubectl uncordon` leaves it), refused unless the node is still the one read."""
    patch = {
        "metadata": {
            "resourceVersion": status.resource_version,
            "annotations": {ANNOTATION: record},
        },
        "spec": {"unschedulable": unschedulable},
    }
    return ["kubectl", "patch", "node", status.name, "--type", "merge", "-p", json.dumps(patch)]


def _guarded(
    run: Run,
    node: str,
    decide: Callable[[NodeStatus], Decision],
    write: Callable[[NodeStatus], list[str]],
    check: bool,
) -> Decision:
    """Read the node, decide, and write when the decision is to; a write refused because the
    node changed since the read is decided again from a new read."""
    for _ in range(ATTEMPTS):
        current = status(run, node)
        decision = decide(current)
        if decision.action == "none" or check:
            return decision
        argv = write(current)
        rc, out, err = run(argv)
        if rc == 0:
            return decision
        if not any(sign in err or sign in out for sign in _CONFLICT):
            raise _failed(argv, rc, out, err)
    raise DrainError(
        f"{node} changed between each of {ATTEMPTS} reads and the write that followed "
        "(Conflict): nothing written; run again when whoever else changes it is done"
    )


def cordon(run: Run, node: str, owner: str, why: str, check: bool = False) -> Decision:
    """Cordon the node for `owner` unless it is cordoned already; the owner is recorded in
    the same write as the cordon, so that no cordon of ours is ever without it."""
    record = reason_for(owner, why)  # ValueError for a bad owner
    return _guarded(
        run,
        node,
        lambda current: decide_cordon(current, owner),
        lambda current: patch_argv(current, record, True),
        check,
    )


def uncordon(run: Run, node: str, owner: str, check: bool = False) -> Decision:
    """Uncordon the node when its cordon is `owner`'s, removing its record in the same
    write; anyone else's is left."""
    return _guarded(
        run,
        node,
        lambda current: decide_uncordon(current, owner),
        lambda current: patch_argv(current, None, None),
        check,
    )
