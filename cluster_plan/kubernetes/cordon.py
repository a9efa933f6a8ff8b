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
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from cluster_plan.slurm.drain import Decision, DrainError, Run, owner_of, reason_for

ANNOTATION = "cluster-plan.io/cordoned-by"


@dataclass(frozen=True)
class NodeStatus:
    """A node as `kubectl get node NODE -o json` shows it."""

    name: str
    unschedulable: bool  # spec.unschedulable: cordoned
    cordoned_by: str  # the ANNOTATION's value, "" without it

    @property
    def held_by(self) -> str:
        """Who holds the node cordoned, in words, for a cordon that is not ours."""
        return self.cordoned_by or "cordoned, no owner recorded"


def _field(obj: Any, *keys: str) -> Any:
    for key in keys:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def parse_node(text: str, node: str) -> NodeStatus:
    """`kubectl get node NODE -o json` -> the node's status; DrainError when the text is not
    that node as JSON."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DrainError(
            f"kubectl get node {node}: not JSON ({exc.msg} at line {exc.lineno}): "
            f"{text.strip()[:200] or 'no output'}"
        ) from None
    if _field(obj, "kind") != "Node" or _field(obj, "metadata", "name") != node:
        raise DrainError(f"kubectl shows no node {node}: {text.strip()[:200]}")
    unschedulable = _field(obj, "spec", "unschedulable")
    annotations = _field(obj, "metadata", "annotations") or {}
    if not isinstance(unschedulable, (bool, type(None))) or not isinstance(annotations, dict):
        raise DrainError(
            f"kubectl get node {node}: spec.unschedulable {unschedulable!r}, "
            f"metadata.annotations {str(annotations)[:200]}: not a node's"
        )
    return NodeStatus(node, bool(unschedulable), str(annotations.get(ANNOTATION, "")))


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


def _must(run: Run, argv: list[str]) -> str:
    rc, out, err = run(argv)
    if rc != 0:
        raise DrainError(f"`{' '.join(argv)}` exited {rc}: {(err or out).strip()[-400:]}")
    return out


def status(run: Run, node: str) -> NodeStatus:
    return parse_node(_must(run, ["kubectl", "get", "node", node, "-o", "json"]), node)


def cordon(run: Run, node: str, owner: str, why: str, check: bool = False) -> Decision:
    """Cordon the node for `owner` unless it is cordoned already; the owner is recorded
    before the cordon, so that no cordon of ours is ever without it."""
    record = f"{ANNOTATION}={reason_for(owner, why)}"  # ValueError for a bad owner
    decision = decide_cordon(status(run, node), owner)
    if decision.action == "cordon" and not check:
        _must(run, ["kubectl", "annotate", "node", node, "--overwrite", record])
        _must(run, ["kubectl", "cordon", node])
    return decision


def uncordon(run: Run, node: str, owner: str, check: bool = False) -> Decision:
    """Uncordon the node when its cordon is `owner`'s; anyone else's is left."""
    decision = decide_uncordon(status(run, node), owner)
    if decision.action == "uncordon" and not check:
        _must(run, ["kubectl", "uncordon", node])
        _must(run, ["kubectl", "annotate", "node", node, f"{ANNOTATION}-"])
    return decision
