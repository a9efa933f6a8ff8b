"""What kube-apiserver itself does around the generated policies, for the fields they read
or write, so that the offline model (k8s_admission.Admission with `builtins=True`) can be
compared with a real API server field by field (test_k8s_apiserver.py).

Read from the pinned release's sources (k8s.io/kubernetes v1.36.3, k8s.io/apiserver v0.36.3):

- The built-in mutating plugins run before MutatingAdmissionPolicy
  (pkg/kubeapiserver/options/plugins.go): Priority resolves `priorityClassName` into
  `priority` (0 with no global default class) and refuses a pod whose `priority` differs from
  its class's; DefaultTolerationSeconds adds five-minute tolerations of the not-ready and
  unreachable taints; RuntimeClass merges the RuntimeClass's `scheduling` into the pod.
- When a MutatingAdmissionPolicy changed the object, the built-in plugins run once more,
  whatever the policy's reinvocationPolicy (policy/mutating/dispatcher.go sets
  ShouldReinvoke; admission/reinvocation.go re-runs the chain): a RuntimeClass the policy
  set is merged then, and Priority checks the priority the policy set against the class it
  set.
- RBAC: who may create pods where, from the RoleBindings (ClusterRoles edit, admin and
  cluster-admin grant it; `system:masters` may do anything).
- ResourceQuota: a pod counts 1 against `pods` and its requests against `requests.<name>`
  (the larger of the containers' sum and the largest init container), in the quotas whose
  PriorityClass scope selects it; the first quota it would exceed refuses it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

# pkg/apis/scheduling: the classes every cluster has
SYSTEM_PRIORITY_CLASSES = {
    "system-node-critical": 2000001000,
    "system-cluster-critical": 2000000000,
}
DEFAULT_PREEMPTION = "PreemptLowerPriority"
TOLERATION_SECONDS = 300
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
POD_CREATORS = ("edit", "admin", "cluster-admin")  # the built-in ClusterRoles that create pods


@dataclass(frozen=True)
class Refusal:
    """Who refused a request (a policy's name, "Priority", "RuntimeClass", "RBAC" or
    "ResourceQuota") and its message, as the API server words it after `forbidden: `."""

    by: str
    message: str


def _of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o.get("kind") == kind]


class Builtins:
    """The built-in plugins, over the cluster's objects (PriorityClasses, RuntimeClasses,
    RoleBindings, ResourceQuotas)."""

    def __init__(self, objects: list[dict[str, Any]]):
        self.priority_classes = dict(SYSTEM_PRIORITY_CLASSES)
        self.preemption: dict[str, str] = {}
        for pc in _of_kind(objects, "PriorityClass"):
            name = pc["metadata"]["name"]
            self.priority_classes[name] = int(pc["value"])
            self.preemption[name] = pc.get("preemptionPolicy", DEFAULT_PREEMPTION)
        defaults = [pc for pc in _of_kind(objects, "PriorityClass") if pc.get("globalDefault")]
        self.default_class = defaults[0]["metadata"]["name"] if defaults else ""
        self.runtime_classes = {o["metadata"]["name"]: o for o in _of_kind(objects, "RuntimeClass")}
        self.role_bindings = _of_kind(objects, "RoleBinding")
        self.quotas = _of_kind(objects, "ResourceQuota")

    # -- the mutating plugins, in the API server's order --

    def mutate(self, pod: dict[str, Any]) -> Refusal | None:
        """One pass of Priority, DefaultTolerationSeconds and RuntimeClass over `pod`, in
        place; a refusal if one of them refuses it."""
        return self._priority(pod) or self._default_tolerations(pod) or self._runtime_class(pod)

    def _priority(self, pod: dict[str, Any]) -> Refusal | None:
        spec = pod["spec"]
        name = spec.get("priorityClassName") or self.default_class
        if name and name not in self.priority_classes:
            return Refusal("Priority", f"no PriorityClass with name {name} was found")
        value = self.priority_classes.get(name, 0) if name else 0
        if "priority" in spec and spec["priority"] != value:
            return Refusal(
                "Priority",
                f"the integer value of priority ({spec['priority']}) must not be provided in pod "
                f"spec; priority admission controller computed {value} from the given "
                "PriorityClass name",
            )
        if name:
            spec["priorityClassName"] = name
        spec["priority"] = value
        spec["preemptionPolicy"] = self.preemption.get(name, DEFAULT_PREEMPTION)
        return None

    @staticmethod
    def _default_tolerations(pod: dict[str, Any]) -> None:
        tolerations = pod["spec"].get("tolerations") or []
        for key in (NOT_READY, UNREACHABLE):
            if not any(
                t.get("key", "") in (key, "") and t.get("effect", "") in ("NoExecute", "")
                for t in tolerations
            ):
                tolerations.append(
                    {
                        "key": key,
                        "operator": "Exists",
                        "effect": "NoExecute",
                        "tolerationSeconds": TOLERATION_SECONDS,
                    }
                )
        pod["spec"]["tolerations"] = tolerations

    def _runtime_class(self, pod: dict[str, Any]) -> Refusal | None:
        spec = pod["spec"]
        name = spec.get("runtimeClassName")
        if not name:
            return None
        runtime = self.runtime_classes.get(name)
        if runtime is None:
            return Refusal("RuntimeClass", f'runtimeclass.node.k8s.io "{name}" not found')
        scheduling = runtime.get("scheduling") or {}
        selector = spec.setdefault("nodeSelector", {})
        for key, value in (scheduling.get("nodeSelector") or {}).items():
            if key in selector and selector[key] != value:
                return Refusal(
                    "RuntimeClass",
                    f"conflict: runtimeClass.scheduling.nodeSelector[{key}] = {value}; "
                    f"pod.spec.nodeSelector[{key}] = {selector[key]}",
                )
            selector[key] = value
        tolerations = spec.setdefault("tolerations", [])
        tolerations += [t for t in scheduling.get("tolerations") or [] if t not in tolerations]
        return None

    # -- authorization and quota --

    def rbac_refusal(
        self, user: str, groups: tuple[str, ...], namespace: str, extra: list[dict[str, Any]]
    ) -> Refusal | None:
        """Whether `user` may create pods in `namespace`, from the plan's RoleBindings and
        `extra` ones (the test's own)."""
        if "system:masters" in groups or user.startswith("system:serviceaccount:kube-system:"):
            return None  # the bootstrap roles of kube-system's controllers create pods
        for binding in [*self.role_bindings, *extra]:
            if binding["metadata"].get("namespace") != namespace:
                continue
            if binding["roleRef"]["name"] not in POD_CREATORS:
                continue
            if any(s["kind"] == "User" and s["name"] == user for s in binding["subjects"]):
                return None
        return Refusal(
            "RBAC",
            f'User "{user}" cannot create resource "pods" in API group "" in the namespace '
            f'"{namespace}"',
        )

    def quota_refusal(self, pod: dict[str, Any], namespace: str) -> Refusal | None:
        usage = pod_usage(pod)
        for quota in self.quotas:
            if quota["metadata"].get("namespace") != namespace:
                continue
            if not _scope_selects(quota["spec"].get("scopeSelector") or {}, pod):
                continue
            hard = {k: int(v) for k, v in quota["spec"]["hard"].items()}
            exceeded = sorted(k for k in hard if usage.get(k, 0) > hard[k])
            if exceeded:

                def listed(values: dict[str, int], keys: list[str] = exceeded) -> str:
                    return ",".join(f"{k}={values.get(k, 0)}" for k in keys)

                return Refusal(
                    "ResourceQuota",
                    f"exceeded quota: {quota['metadata']['name']}, requested: {listed(usage)}, "
                    f"used: {listed({})}, limited: {listed(hard)}",
                )
        return None


def pod_usage(pod: dict[str, Any]) -> dict[str, int]:
    """What a pod counts against quotas, for `pods` and integer `requests.<name>`."""

    def requests(container: dict[str, Any]) -> dict[str, int]:
        resources = container.get("resources") or {}
        # the API server defaults requests to limits where a container gives only limits
        merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        return {k: int(v) for k, v in merged.items() if str(v).isdigit()}

    total: dict[str, int] = {}
    for container in pod["spec"]["containers"]:
        for key, value in requests(container).items():
            total[key] = total.get(key, 0) + value
    for container in pod["spec"].get("initContainers") or []:
        for key, value in requests(container).items():
            total[key] = max(total.get(key, 0), value)
    return {"pods": 1, **{f"requests.{k}": v for k, v in sorted(total.items())}}


def _scope_selects(selector: dict[str, Any], pod: dict[str, Any]) -> bool:
    for expression in selector.get("matchExpressions") or []:
        if expression["scopeName"] != "PriorityClass":
            raise ValueError(f"scope {expression['scopeName']} is not modelled")
        name = pod["spec"].get("priorityClassName", "")
        operator = expression["operator"]
        if operator == "In" and name not in expression["values"]:
            return False
        if operator == "NotIn" and name in expression["values"]:
            return False
        if operator == "Exists" and not name:
            return False
        if operator == "DoesNotExist" and name:
            return False
    return True


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
