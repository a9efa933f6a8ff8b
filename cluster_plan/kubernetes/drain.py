"""Moving the pods off a cordoned Kubernetes node: after the cordon
(cluster_plan.kubernetes.cordon), what a Slurm drain's wait for the jobs is
(cluster_plan.slurm.drain.wait_for_jobs).

The pods go through `kubectl drain`, whose rules are the ones an operator knows:

- without force, each pod is evicted through the Eviction API, which refuses (429) a pod
  whose PodDisruptionBudget allows no disruption; kubectl asks again every 5 s and waits
  for each evicted pod to be gone, until `--timeout`;
- with force, each pod is deleted (`--disable-eviction`: no budget is consulted), and so
  is a pod that declares no controller (`--force`), which nothing recreates elsewhere;
- DaemonSets' pods stay (`--ignore-daemonsets`: their controller ignores the cordon), and
  so do mirror pods (a static pod's, which only its kubelet removes);
- a pod with emptyDir volumes goes with that scratch data (`--delete-emptydir-data`): it is
  the pod's own, lost wherever the pod is evicted to; a finished pod (Succeeded, Failed) goes
  whatever else it is.

Without force, a pod that declares no controller stops the drain before anything is
evicted (kubectl's own rule, checked here first to name the pods). `--request-timeout` is
the drain's timeout too: an eviction refused with a Retry-After (a budget the disruption
controller has not counted yet answers "retry after 10 s") is retried inside kubectl's
client, ten times, past `--timeout`; the request timeout ends it within the bound.

A drain that does not end in time is read again: the pods still on the node are named,
each with the PodDisruptionBudgets that select it and what their status allows, as the
API server decides an eviction (the budgets of the pod's namespace whose selector matches
its labels; an empty selector selects every pod, a missing one none).

Each command is an argv handed to a `Run` callable (cluster_plan.slurm.drain.Run), run on a
host whose kubectl reaches the cluster; the decisions are tested with recorded
`kubectl get pods -o json` and `kubectl get poddisruptionbudgets -o json` output.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cluster_plan.kubernetes.cordon import field_at, kubectl_json
from cluster_plan.slurm.drain import DrainError, Run

Answer = tuple[int, str, str]  # what a Run returns: exit status, stdout, stderr
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
FINISHED = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class Pod:
    """A pod on the node, as `kubectl get pods -o json` shows it."""

    namespace: str
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    controller: str = ""  # the kind of its controlling owner, "" for none
    phase: str = "Running"
    mirror: bool = False
    emptydir: bool = False
    deleting: bool = False  # metadata.deletionTimestamp: ends when its kubelet confirms it

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def stays(self) -> bool:
        """Left on the node by a drain: a mirror pod, a running DaemonSet pod."""
        return self.mirror or (self.controller == "DaemonSet" and self.phase not in FINISHED)

    @property
    def bare(self) -> bool:
        """Declares no controller and still runs: nothing recreates it; only force deletes it."""
        return not self.controller and not self.stays and self.phase not in FINISHED


def _items(text: str, what: str) -> list[dict[str, Any]]:
    obj = kubectl_json(text, what)
    items = field_at(obj, "items")
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise DrainError(f"kubectl get {what}: not a list of {what}: {text.strip()[:200]}")
    return items


def _controller(item: dict[str, Any]) -> str:
    for owner in field_at(item, "metadata", "ownerReferences") or []:
        if isinstance(owner, dict) and owner.get("controller") is True:
            return str(owner.get("kind", ""))
    return ""


def parse_pods(text: str) -> list[Pod]:
    """`kubectl get pods -o json` -> its pods; DrainError when the text is not a pod list."""
    pods = []
    for item in _items(text, "pods"):
        metadata = item.get("metadata") or {}
        volumes = field_at(item, "spec", "volumes") or []
        pods.append(
            Pod(
                namespace=str(metadata.get("namespace", "")),
                name=str(metadata.get("name", "")),
                labels=dict(metadata.get("labels") or {}),
                controller=_controller(item),
                phase=str(field_at(item, "status", "phase") or ""),
                mirror=MIRROR_ANNOTATION in (metadata.get("annotations") or {}),
                emptydir=any(isinstance(v, dict) and "emptyDir" in v for v in volumes),
                deleting=bool(metadata.get("deletionTimestamp")),
            )
        )
    return pods


def _requirement(requirement: Any, labels: dict[str, str]) -> bool:
    key, operator = requirement.get("key"), requirement.get("operator")
    values = requirement.get("values") or []
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    return False  # an operator the API server does not know selects nothing


def selects(selector: Any, labels: dict[str, str]) -> bool:
    """A LabelSelector as the API server applies a budget's: none selects nothing, an empty
    one every pod, otherwise every matchLabels pair and matchExpressions requirement holds."""
    if not isinstance(selector, dict):
        return False
    match = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    return all(labels.get(k) == v for k, v in match.items()) and all(
        isinstance(r, dict) and _requirement(r, labels) for r in expressions
    )


@dataclass(frozen=True)
class Budget:
    """A PodDisruptionBudget, as `kubectl get poddisruptionbudgets -o json` shows it."""

    namespace: str
    name: str
    selector: Any  # spec.selector as the API has it (None: selects nothing)
    allowed: int  # status.disruptionsAllowed
    counted: bool  # the disruption controller has seen this generation
    desired: int  # status.desiredHealthy
    healthy: int  # status.currentHealthy

    def covers(self, pod: Pod) -> bool:
        return pod.namespace == self.namespace and selects(self.selector, pod.labels)

    @property
    def described(self) -> str:
        name = f"PodDisruptionBudget {self.namespace}/{self.name}"
        if not self.counted:
            return (
                f"{name} (not counted yet by the disruption controller: every eviction "
                "is refused until it is)"
            )
        return (
            f"{name} ({self.allowed} disruption(s) allowed; {self.healthy} pod(s) healthy, "
            f"{self.desired} needed)"
        )


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


def parse_budgets(text: str) -> list[Budget]:
    """`kubectl get poddisruptionbudgets -o json` -> its budgets."""
    budgets = []
    for item in _items(text, "poddisruptionbudgets"):
        metadata, status = item.get("metadata") or {}, item.get("status") or {}
        budgets.append(
            Budget(
                namespace=str(metadata.get("namespace", "")),
                name=str(metadata.get("name", "")),
                selector=field_at(item, "spec", "selector"),
                allowed=_int(status.get("disruptionsAllowed")),
                counted=_int(status.get("observedGeneration")) >= _int(metadata.get("generation")),
                desired=_int(status.get("desiredHealthy")),
                healthy=_int(status.get("currentHealthy")),
            )
        )
    return budgets


def held_by(pod: Pod, budgets: list[Budget]) -> list[Budget]:
    return [b for b in budgets if b.covers(pod)]


def pods_argv(node: str) -> list[str]:
    return ["kubectl", "get", "pods", "--all-namespaces", "--field-selector",
            f"spec.nodeName={node}", "-o", "json"]  # fmt: skip


BUDGETS_ARGV = ["kubectl", "get", "poddisruptionbudgets", "--all-namespaces", "-o", "json"]


def _bound(argv: list[str]) -> str:
    """The drain's bound as its argv has it (`10 s`)."""
    timeout = next(a for a in argv if a.startswith("--timeout="))
    return f"{timeout.removeprefix('--timeout=').removesuffix('s')} s"


def drain_argv(node: str, timeout_s: float, force: bool) -> list[str]:
    """`kubectl drain` of the node within `timeout_s` (at least 1 s: kubectl's 0 is no
    bound); with force, deleting instead of evicting, bare pods included."""
    bound = f"{max(1, round(timeout_s))}s"
    argv = ["kubectl", "drain", node, "--ignore-daemonsets", "--delete-emptydir-data",
            f"--timeout={bound}", f"--request-timeout={bound}"]  # fmt: skip
    return argv + (["--force", "--disable-eviction"] if force else [])


@dataclass(frozen=True)
class Drained:
    """What a drain did: the pods it moved off the node, those it left (DaemonSets', mirror
    pods), and, with force, those deleted despite a budget, each with the budget's words."""

    node: str
    moved: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    overridden: tuple[str, ...] = ()
    emptied: tuple[str, ...] = ()  # moved with their emptyDir data deleted
    force: bool = False

    @property
    def lines(self) -> list[str]:
        verb = "deleted" if self.force else "evicted"
        lines = [
            f"{self.node}: {verb} {', '.join(self.moved)}"
            if self.moved
            else f"{self.node}: no pod to move"
        ]
        if self.overridden:
            lines.append(
                f"{self.node}: deleted despite a PodDisruptionBudget (--force): "
                + "; ".join(self.overridden)
            )
        if self.emptied:
            lines.append(f"{self.node}: emptyDir data deleted with {', '.join(self.emptied)}")
        if self.kept:
            lines.append(f"{self.node}: left on it (DaemonSets', mirror pods): "
                         f"{', '.join(self.kept)}")  # fmt: skip
        return lines


def _must(run: Run, argv: list[str]) -> str:
    rc, out, err = run(argv)
    if rc != 0:
        raise DrainError(f"`{' '.join(argv)}` exited {rc}: {(err or out).strip()[-400:]}")
    return out


def _refs(pods: list[Pod]) -> str:
    return ", ".join(p.ref for p in pods)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][-300:] if lines else "no output"


def _blocked(node: str, left: list[Pod], budgets: list[Budget], argv: list[str], said: str) -> str:
    """The pods the drain did not move in time, each with what holds it; kubectl's last
    word where a pod is neither held by a budget nor terminating."""
    parts = []
    for pod in left:
        holders = held_by(pod, budgets)
        if holders:
            parts.append(f"{pod.ref} held by " + " and ".join(b.described for b in holders))
        elif pod.deleting:
            verb = "deleted" if "--disable-eviction" in argv else "evicted"
            parts.append(f"{pod.ref} {verb}, still terminating (its kubelet has not ended it)")
        else:
            parts.append(f"{pod.ref} not moved (kubectl drain: {_last_line(said)})")
    return (
        f"drain of {node}: after {_bound(argv)}, pod(s) still on it: "
        + "; ".join(parts)
        + f"; {node} stays cordoned"
    )


def _failed(run: Run, node: str, leaving: list[Pod], argv: list[str], answer: Answer) -> str:
    """Why a `kubectl drain` that exited non-zero left pods: they are read again, with the
    budgets as they are now."""
    rc, out, err = answer
    names = {p.ref for p in leaving}
    left = [p for p in parse_pods(_must(run, pods_argv(node))) if p.ref in names]
    if not left:
        return f"`{' '.join(argv)}` exited {rc}: {(err or out).strip()[-400:]}"
    return _blocked(node, left, parse_budgets(_must(run, BUDGETS_ARGV)), argv, err or out)


def _moved(
    node: str, kept: tuple[str, ...], leaving: list[Pod], budgets: list[Budget], force: bool
) -> Drained:
    overridden = []
    for pod in leaving:
        holders = held_by(pod, budgets) if force else []
        if holders:
            overridden.append(f"{pod.ref} ({', '.join(b.described for b in holders)})")
    return Drained(
        node,
        moved=tuple(p.ref for p in leaving),
        kept=kept,
        overridden=tuple(overridden),
        emptied=tuple(p.ref for p in leaving if p.emptydir and p.phase not in FINISHED),
        force=force,
    )


def to_move(run: Run, node: str) -> list[str]:
    """The pods a drain of the node would move, read and left where they are (what check
    mode reports)."""
    return [p.ref for p in parse_pods(_must(run, pods_argv(node))) if not p.stays]


def drain(run: Run, node: str, timeout_s: float, force: bool = False) -> Drained:
    """Move the pods off the cordoned node within `timeout_s`: evicted, or with force
    deleted. DrainError naming the pods (and what holds each) when they stay."""
    pods = parse_pods(_must(run, pods_argv(node)))
    leaving = [p for p in pods if not p.stays]
    kept = tuple(p.ref for p in pods if p.stays)
    bare = [p for p in leaving if p.bare]
    if bare and not force:
        raise DrainError(
            f"drain of {node}: pod(s) {_refs(bare)} declare no controller (nothing recreates "
            f"them elsewhere): nothing was evicted; {node} stays cordoned"
        )
    if not leaving:
        return Drained(node, kept=kept, force=force)
    budgets = parse_budgets(_must(run, BUDGETS_ARGV))
    argv = drain_argv(node, timeout_s, force)
    answer = run(argv)
    if answer[0] != 0:
        raise DrainError(_failed(run, node, leaving, argv, answer))
    return _moved(node, kept, leaving, budgets, force)
