"""The plan's routing policy as in-tree admission policies (CEL), not code of ours.

A pod declares its workload class, dataset and reservation with labels
(`cluster-plan.io/workload-class`, `cluster-plan.io/dataset`, `cluster-plan.io/reservation`).
On CREATE, in every namespace but the cluster's own:

- `cluster-plan-workload-routing` (MutatingAdmissionPolicy) resolves the class (declared,
  else from the device resources it asks for, else the default), labels the pod with it, sets
  a nodeSelector on the class's pool, a toleration for the pool's taint, the class's
  PriorityClass (and its value: the Priority admission plugin ran before this policy), the
  `nvidia` RuntimeClass for pods asking for NVIDIA GPUs, and a preferred node affinity for
  nodes holding the declared dataset;
- `cluster-plan-reservations` (MutatingAdmissionPolicy) adds the toleration of a declared
  reservation's taint;
- `cluster-plan-workload-declarations` (ValidatingAdmissionPolicy) refuses unknown classes,
  datasets and reservations, a pool asked for (nodeSelector `cluster-plan.io/pool`) that is
  not the class's, and reservations declared by someone the plan does not list.

Every mutation is guarded so that running it again changes nothing.
"""

from __future__ import annotations

import re
from typing import Any

from cluster_plan.kubernetes import cel, names
from cluster_plan.kubernetes.cluster import KubernetesPlan
from cluster_plan.kubernetes.routing import RoutingTable

ROUTING_POLICY = "cluster-plan-workload-routing"
RESERVATION_POLICY = "cluster-plan-reservations"
VALIDATION_POLICY = "cluster-plan-workload-declarations"
DATASET_WEIGHT = 100
# Pods that controllers in kube-system create (ReplicaSets, Jobs, DaemonSets) carry their
# owner's declarations; whoever created the owner was checked when the pod template was.
_CONTROLLERS = "system:serviceaccount:kube-system:"

_POD_RULES = {
    "resourceRules": [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE"],
            "resources": ["pods"],
        }
    ],
    "namespaceSelector": {
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": list(names.SYSTEM_NAMESPACES),
            }
        ]
    },
}

_PREFERRED = "Object.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
_AFFINITY_PATH = "/spec/affinity/nodeAffinity/preferredDuringSchedulingIgnoredDuringExecution"


def _meta(name: str) -> dict[str, Any]:
    return {"name": name, "labels": dict(names.MANAGED_BY)}


def _patch(op: str, path: str, value: str) -> str:
    return f"JSONPatch{{op: {cel.string(op)}, path: {cel.string(path)}, value: {value}}}"


def _json_patch(expression: str) -> dict[str, Any]:
    return {"patchType": "JSONPatch", "jsonPatch": {"expression": expression}}


def asks_variable(resource: str) -> str:
    """The policy variable saying whether a pod asks for `resource`: `asks_nvidia_com_gpu`."""
    return "asks_" + re.sub(r"[^A-Za-z0-9]", "_", resource)


def _workload_class(table: RoutingTable) -> str:
    """Declared, else asked-for device resources in plan order, else the default."""
    fallback = cel.string(table.default_class or "")
    for resource, wclass in reversed(table.resource_classes.items()):
        fallback = f"variables.{asks_variable(resource)} ? {cel.string(wclass)} :\n{fallback}"
    return f"variables.declaredClass != '' ? variables.declaredClass :\n{fallback}"


def _label_mutation() -> str:
    pointer = names.json_pointer("metadata", "labels", names.CLASS_LABEL)
    whole = cel.string_map({names.CLASS_LABEL: "X"}).replace("'X'", "variables.workloadClass")
    return (
        f"!has(object.metadata.labels) ? [{_patch('add', '/metadata/labels', whole)}] :\n"
        f"{cel.string(names.CLASS_LABEL)} in object.metadata.labels ? [] :\n"
        f"[{_patch('add', pointer, 'variables.workloadClass')}]"
    )


def _node_selector_mutation() -> str:
    """The pool, unless the pod asks for one: the validating policy refuses another pool
    than its class's rather than moving the pod silently."""
    pointer = names.json_pointer("spec", "nodeSelector", names.POOL_LABEL)
    whole = cel.string_map({names.POOL_LABEL: "X"}).replace("'X'", "variables.pool")
    return (
        "!has(object.spec.nodeSelector) ? "
        f"[{_patch('add', '/spec/nodeSelector', whole)}] :\n"
        f"{cel.string(names.POOL_LABEL)} in object.spec.nodeSelector ? [] :\n"
        f"[{_patch('add', pointer, 'variables.pool')}]"
    )


def _toleration_mutation(tainted: list[str]) -> str:
    toleration = (
        f"Object.spec.tolerations{{key: {cel.string(names.POOL_LABEL)}, operator: 'Equal', "
        "value: variables.pool, effect: 'NoSchedule'}"
    )
    present = (
        "has(object.spec.tolerations) && object.spec.tolerations.exists(t, "
        f"has(t.key) && t.key == {cel.string(names.POOL_LABEL)} && "
        "has(t.value) && t.value == variables.pool)"
    )
    return (
        f"!(variables.workloadClass in {cel.string_list(tainted)}) || ({present}) ? [] :\n"
        f"has(object.spec.tolerations) ? [{_patch('add', '/spec/tolerations/-', toleration)}] :\n"
        f"[{_patch('add', '/spec/tolerations', f'[{toleration}]')}]"
    )


def _priority_mutation(table: RoutingTable) -> str:
    class_names = cel.string_map({c: r.priority_class for c, r in table.routes.items()})
    values = cel.int_map({c: r.priority for c, r in table.routes.items()})
    return (
        "has(object.spec.priorityClassName) && object.spec.priorityClassName != '' ? [] :\n"
        f"[{_patch('add', '/spec/priorityClassName', f'{class_names}[variables.workloadClass]')},\n"
        f" {_patch('add', '/spec/priority', f'{values}[variables.workloadClass]')}]"
    )


def _runtime_class_mutation() -> str:
    return (
        f"!variables.{asks_variable(names.NVIDIA_GPU)} || "
        "has(object.spec.runtimeClassName) ? [] :\n"
        f"[{_patch('add', '/spec/runtimeClassName', cel.string(names.NVIDIA_RUNTIME))}]"
    )


def _dataset_mutation(table: RoutingTable) -> str:
    local = [f"{c}/{d}" for c, r in table.routes.items() for d in r.local_datasets]
    term = (
        f"{_PREFERRED}{{weight: {DATASET_WEIGHT}, preference: {_PREFERRED}.preference{{"
        f"matchExpressions: [{_PREFERRED}.preference.matchExpressions{{"
        f"key: {cel.string(names.dataset_label(''))} + variables.dataset, "
        "operator: 'Exists'}]}}"
    )
    node_affinity = (
        "Object.spec.affinity.nodeAffinity{"
        f"preferredDuringSchedulingIgnoredDuringExecution: [{term}]}}"
    )
    affinity = f"Object.spec.affinity{{nodeAffinity: {node_affinity}}}"
    present = (
        f"object.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
        f".exists(p, p.weight == {DATASET_WEIGHT} && has(p.preference.matchExpressions) && "
        "p.preference.matchExpressions.exists(e, "
        f"e.key == {cel.string(names.dataset_label(''))} + variables.dataset))"
    )
    return (
        "variables.dataset == '' || "
        f"!((variables.workloadClass + '/' + variables.dataset) in {cel.string_list(local)})"
        " ? [] :\n"
        f"!has(object.spec.affinity) ? [{_patch('add', '/spec/affinity', affinity)}] :\n"
        "!has(object.spec.affinity.nodeAffinity) ? "
        f"[{_patch('add', '/spec/affinity/nodeAffinity', node_affinity)}] :\n"
        "!has(object.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution)"
        f" ? [{_patch('add', _AFFINITY_PATH, f'[{term}]')}] :\n"
        f"{present} ? [] :\n"
        f"[{_patch('add', _AFFINITY_PATH + '/-', term)}]"
    )


def routing_policy(plan: KubernetesPlan, table: RoutingTable) -> dict[str, Any]:
    known = cel.string_list(table.routes)
    tainted = [c for c, r in table.routes.items() if r.tolerate_pool]
    mutations = [_label_mutation(), _node_selector_mutation()]
    if tainted:
        mutations.append(_toleration_mutation(tainted))
    mutations.append(_priority_mutation(table))
    if table.gpu_resources:
        mutations.append(_runtime_class_mutation())
    if any(r.local_datasets for r in table.routes.values()):
        mutations.append(_dataset_mutation(table))
    pools = cel.string_map({c: r.pool for c, r in table.routes.items()})
    return {
        "apiVersion": plan.release.mutating_policy_api,
        "kind": "MutatingAdmissionPolicy",
        "metadata": _meta(ROUTING_POLICY),
        "spec": {
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
            "matchConstraints": _POD_RULES,
            # unknown classes are left to the validating policy, which says what is wrong
            "matchConditions": [
                {
                    "name": "class-is-known",
                    "expression": f"!{cel.has_label(names.CLASS_LABEL)} || "
                    f"{cel.label(names.CLASS_LABEL)} in {known}",
                }
            ],
            "variables": [
                {"name": "declaredClass", "expression": cel.label_or_empty(names.CLASS_LABEL)},
                *(
                    {"name": asks_variable(r), "expression": cel.asks_for(r)}
                    for r in table.resource_classes
                ),
                {"name": "workloadClass", "expression": _workload_class(table)},
                {"name": "pool", "expression": f"{pools}[variables.workloadClass]"},
                {"name": "dataset", "expression": cel.label_or_empty(names.DATASET_LABEL)},
            ],
            "mutations": [_json_patch(m) for m in mutations],
        },
    }


def reservation_policy(plan: KubernetesPlan, table: RoutingTable) -> dict[str, Any]:
    toleration = (
        f"Object.spec.tolerations{{key: {cel.string(names.reservation_taint(''))} + "
        f"{cel.label(names.RESERVATION_LABEL)}, operator: 'Exists', effect: 'NoSchedule'}}"
    )
    present = (
        "has(object.spec.tolerations) && object.spec.tolerations.exists(t, has(t.key) && "
        f"t.key == {cel.string(names.reservation_taint(''))} + "
        f"{cel.label(names.RESERVATION_LABEL)})"
    )
    expression = (
        f"{present} ? [] :\n"
        f"has(object.spec.tolerations) ? [{_patch('add', '/spec/tolerations/-', toleration)}] :\n"
        f"[{_patch('add', '/spec/tolerations', f'[{toleration}]')}]"
    )
    return {
        "apiVersion": plan.release.mutating_policy_api,
        "kind": "MutatingAdmissionPolicy",
        "metadata": _meta(RESERVATION_POLICY),
        "spec": {
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
            "matchConstraints": _POD_RULES,
            "matchConditions": [
                {
                    "name": "reservation-is-known",
                    "expression": f"{cel.has_label(names.RESERVATION_LABEL)} && "
                    f"{cel.label(names.RESERVATION_LABEL)} in "
                    f"{cel.string_list(table.reservations)}",
                }
            ],
            "mutations": [_json_patch(expression)],
        },
    }


def _known(key: str, values: list[str], what: str) -> dict[str, str]:
    listed = ", ".join(values) or "none"
    return {
        "expression": f"!{cel.has_label(key)} || {cel.label(key)} in {cel.string_list(values)}",
        "messageExpression": f"'unknown {what} ' + {cel.label(key)} + "
        f"{cel.string(f' in label {key}; the plan has: {listed}')}",
        "reason": "Invalid",
    }


def _pool_of_class(table: RoutingTable) -> dict[str, str]:
    """A pod asking for a pool (nodeSelector) other than its class's; the routing policy has
    set the class by then, declared or not."""
    pools = cel.string_map({c: r.pool for c, r in table.routes.items()})
    declared = cel.label(names.CLASS_LABEL)
    asked = f"object.spec.nodeSelector[{cel.string(names.POOL_LABEL)}]"
    return {
        "expression": f"!has(object.spec.nodeSelector) || "
        f"!({cel.string(names.POOL_LABEL)} in object.spec.nodeSelector) || "
        f"!{cel.has_label(names.CLASS_LABEL)} || !({declared} in {pools}) || "
        f"{asked} == {pools}[{declared}]",
        "messageExpression": f"'workload class ' + {declared} + ' runs on pool ' + "
        f"{pools}[{declared}] + ', not ' + {asked} + "
        + cel.string(
            f" (nodeSelector {names.POOL_LABEL}); declare the class of the pool "
            f"({names.CLASS_LABEL}) instead"
        ),
        "reason": "Invalid",
    }


def _reservation_users(table: RoutingTable) -> dict[str, str]:
    allowed = []
    for name, reservation in table.reservations.items():
        who = [f"request.userInfo.username.startsWith({cel.string(_CONTROLLERS)})"]
        if reservation.users:
            who.append(f"request.userInfo.username in {cel.string_list(reservation.users)}")
        if reservation.namespaces:
            who.append(f"request.namespace in {cel.string_list(reservation.namespaces)}")
        allowed.append(
            f"({cel.label(names.RESERVATION_LABEL)} == {cel.string(name)} && ({' || '.join(who)}))"
        )
    return {
        "expression": f"!{cel.has_label(names.RESERVATION_LABEL)} || "
        + (" || ".join(allowed) or "false"),
        "messageExpression": f"'reservation ' + {cel.label(names.RESERVATION_LABEL)} + "
        "' is not open to ' + request.userInfo.username",
        "reason": "Forbidden",
    }


def validation_policy(plan: KubernetesPlan, table: RoutingTable) -> dict[str, Any]:
    validations = [
        _known(names.CLASS_LABEL, list(table.routes), "workload class"),
        _known(names.DATASET_LABEL, list(table.datasets), "dataset"),
        _known(names.RESERVATION_LABEL, list(table.reservations), "reservation"),
    ]
    if table.routes:
        validations.append(_pool_of_class(table))
    if table.reservations:
        validations.append(_reservation_users(table))
    return {
        "apiVersion": plan.release.validating_policy_api,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": _meta(VALIDATION_POLICY),
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": _POD_RULES,
            "validations": validations,
        },
    }


def _binding(policy: dict[str, Any]) -> dict[str, Any]:
    kind = policy["kind"]
    spec: dict[str, Any] = {"policyName": policy["metadata"]["name"]}
    if kind == "ValidatingAdmissionPolicy":
        spec["validationActions"] = ["Deny"]
    return {
        "apiVersion": policy["apiVersion"],
        "kind": f"{kind}Binding",
        "metadata": _meta(policy["metadata"]["name"]),
        "spec": spec,
    }


def admission_objects(plan: KubernetesPlan, table: RoutingTable) -> list[dict[str, Any]]:
    """The policies, each followed by its binding."""
    policies = []
    if table.routes:
        policies.append(routing_policy(plan, table))
    if table.reservations:
        policies.append(reservation_policy(plan, table))
    policies.append(validation_policy(plan, table))
    return [obj for policy in policies for obj in (policy, _binding(policy))]
