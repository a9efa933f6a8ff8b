"""Where a pod can run, as kube-scheduler's filters decide it (node selector, required node
affinity, taints and tolerations, device resources), and which of those nodes its preferred
node affinity favours. Enough of the scheduler to check the routing policy's results."""

from __future__ import annotations

from typing import Any


def _expression_matches(expr: dict[str, Any], labels: dict[str, str]) -> bool:
    key, op = expr["key"], expr["operator"]
    present, value = key in labels, labels.get(key)
    if op == "In":
        return present and value in expr["values"]
    if op == "NotIn":
        return not present or value not in expr["values"]
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        if not present:
            return False
        number, bound = int(str(value)), int(expr["values"][0])
        return number > bound if op == "Gt" else number < bound
    raise ValueError(f"unknown operator {op}")


def _term_matches(term: dict[str, Any], labels: dict[str, str]) -> bool:
    return all(_expression_matches(e, labels) for e in term.get("matchExpressions") or [])


def tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint["effect"]:
            continue
        if t.get("operator", "Equal") == "Exists":
            if not t.get("key") or t["key"] == taint["key"]:
                return True
        elif t.get("key") == taint["key"] and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def requested(pod: dict[str, Any]) -> dict[str, int]:
    """Device resources the pod needs: per resource, the larger of the sum over containers
    and the largest init container (as the scheduler counts them)."""

    def of(c: dict[str, Any]) -> dict[str, int]:
        res = c.get("resources") or {}
        merged = {**(res.get("requests") or {}), **(res.get("limits") or {})}
        return {k: int(v) for k, v in merged.items() if "/" in k}

    total: dict[str, int] = {}
    for c in pod["spec"]["containers"]:
        for k, v in of(c).items():
            total[k] = total.get(k, 0) + v
    for c in pod["spec"].get("initContainers") or []:
        for k, v in of(c).items():
            total[k] = max(total.get(k, 0), v)
    return total


def feasible(
    pod: dict[str, Any], nodes: list[dict[str, Any]], capacity: dict[str, dict[str, int]]
) -> list[str]:
    spec = pod["spec"]
    selector = spec.get("nodeSelector") or {}
    required = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {})
        .get("nodeSelectorTerms")
    )
    tolerations = spec.get("tolerations") or []
    needs = requested(pod)
    out = []
    for node in nodes:
        name = node["metadata"]["name"]
        labels = node["metadata"].get("labels") or {}
        if any(labels.get(k) != v for k, v in selector.items()):
            continue
        if required and not any(_term_matches(t, labels) for t in required):
            continue
        taints = (node.get("spec") or {}).get("taints") or []
        if any(
            t["effect"] in ("NoSchedule", "NoExecute") and not tolerates(tolerations, t)
            for t in taints
        ):
            continue
        if any(capacity.get(name, {}).get(r, 0) < n for r, n in needs.items()):
            continue
        out.append(name)
    return out


def preferred(pod: dict[str, Any], nodes: list[dict[str, Any]], among: list[str]) -> list[str]:
    """The nodes of `among` with the highest preferred-affinity score (all when none score)."""
    terms = ((pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}).get(
        "preferredDuringSchedulingIgnoredDuringExecution"
    ) or []
    scores = {}
    for node in nodes:
        name = node["metadata"]["name"]
        if name in among:
            labels = node["metadata"].get("labels") or {}
            scores[name] = sum(t["weight"] for t in terms if _term_matches(t["preference"], labels))
    best = max(scores.values(), default=0)
    return [n for n in among if scores.get(n) == best]
