"""The admission cases a real API server and the offline model both decide, and how their
answers are compared (test_k8s_apiserver.py runs them against kube-apiserver,
test_k8s_api_cases.py against the model alone). Pure: no server here.

Per plan, every case says what the plan wants (admitted, or refused by whom):

- a pod declaring each served workload class, with and without each dataset; one declaring
  nothing; one asking for each device resource;
- refused: an unknown class, dataset or reservation; a pool other than its class's;
- kept: a user's own toleration and nodeSelector entry, a priority class it names; a pod in
  kube-system is left alone;
- each reservation: declared by one of its users, by a stranger (refused), by a
  kube-system controller;
- each team with users: a member's pod in the team's namespace, in another team's (refused
  by RBAC), of a class the team may not use (refused by the team's policy), over the team's
  device quota (refused by the quota) and at it; a pod naming a refused class's
  PriorityClass itself (the team's zero-pod quota); a Job without a deadline where the team
  has a max_time (refused) and with one.

The comparison looks at what the policies touch (labels, nodeSelector, tolerations, the
priority class and value, the RuntimeClass, affinity) or at the refusal (who and the
message); tolerations are compared as a set (the API server runs the two mutating policies
in no fixed order).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from k8s_builtin_admission import Refusal, canonical

from cluster_plan.kubernetes import Rendering, names
from cluster_plan.kubernetes.admission import VALIDATION_POLICY
from cluster_plan.kubernetes.teams import MEMBER_ROLE

NAMESPACE = "cluster-plan-apitest"  # the cases' own namespace, made by the test
ADMIN = "kubernetes-admin"
ADMIN_GROUPS = ("system:masters", "system:authenticated")
MEMBER_GROUPS = ("system:authenticated",)
STRANGER = "mallory"
CONTROLLER = "system:serviceaccount:kube-system:job-controller"
PODS = ("", "pods")
JOBS = ("batch", "jobs")


@dataclass(frozen=True)
class Case:
    name: str
    body: dict[str, Any]
    namespace: str = NAMESPACE
    user: str = ADMIN  # anyone else is impersonated by the admin
    resource: tuple[str, str] = PODS
    refused_by: str | None = None  # what the plan wants: admitted, or refused by this

    @property
    def groups(self) -> tuple[str, ...]:
        return ADMIN_GROUPS if self.user == ADMIN else MEMBER_GROUPS

    @property
    def impersonated(self) -> str | None:
        return None if self.user == ADMIN else self.user


@dataclass(frozen=True)
class Outcome:
    """A decision: the object as admitted, or the refusal."""

    admitted: dict[str, Any] | None = None
    refusals: tuple[Refusal, ...] = field(default_factory=tuple)


def pod(
    labels: dict[str, str] | None = None,
    limits: dict[str, int] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "registry.example/app:1"}
    if limits:
        container["resources"] = {"limits": {k: str(v) for k, v in limits.items()}}
    metadata: dict[str, Any] = {"name": "p"}
    if labels:
        metadata["labels"] = dict(labels)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": [container], **spec},
    }


def job(deadline: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "registry.example/app:1"}],
            }
        }
    }
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": spec}


# --- what the plan holds, read from the expanded plan and the rendering ---


def _objects(rendering: Rendering, kind: str) -> list[dict[str, Any]]:
    return [o for o in rendering.all_objects() if o["kind"] == kind]


def _pools(expanded: dict[str, Any], rendering: Rendering) -> dict[str, str]:
    """Served class -> pool (a class without workers has no PriorityClass: not served)."""
    served = {o["metadata"]["name"] for o in _objects(rendering, "PriorityClass")}
    classes = expanded["scheduler"]["workload_classes"]
    return {c: str(s["pool"]) for c, s in classes.items() if f"workload-{c}" in served}


def fixture_objects(expanded: dict[str, Any]) -> list[dict[str, Any]]:
    """The test's own namespace, and `edit` in it for the reservations' users and the
    stranger (who create pods there by impersonation)."""
    reservations = expanded["scheduler"].get("reservations") or {}
    users = [str(u) for r in reservations.values() for u in r.get("users") or []]
    rbac = "rbac.authorization.k8s.io"
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "apitest-users", "namespace": NAMESPACE},
            "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": MEMBER_ROLE},
            "subjects": [
                {"apiGroup": rbac, "kind": "User", "name": u}
                for u in dict.fromkeys([*users, STRANGER])
            ],
        },
    ]


# --- the cases ---


def _routing_cases(expanded: dict[str, Any], rendering: Rendering) -> list[Case]:
    pools = _pools(expanded, rendering)
    datasets = list(expanded["scheduler"].get("datasets") or {})
    cases = []
    for wclass in pools:
        cases.append(Case(f"class-{wclass}", pod({names.CLASS_LABEL: wclass})))
        for dataset in datasets:
            labels = {names.CLASS_LABEL: wclass, names.DATASET_LABEL: dataset}
            cases.append(Case(f"class-{wclass}-dataset-{dataset}", pod(labels)))
    cases.append(Case("undeclared", pod()))
    for resource in _resource_classes(rendering):
        cases.append(Case(f"asks-{resource}", pod(limits={resource: 1})))
    for wclass, pool in pools.items():
        other = next((p for p in pools.values() if p != pool), None)
        if other is not None:
            wrong = pod({names.CLASS_LABEL: wclass}, nodeSelector={names.POOL_LABEL: other})
            cases.append(
                Case(f"class-{wclass}-asks-pool-{other}", wrong, refused_by=VALIDATION_POLICY)
            )
            right = pod({names.CLASS_LABEL: wclass}, nodeSelector={names.POOL_LABEL: pool})
            cases.append(Case(f"class-{wclass}-asks-its-pool", right))
    unknown = [
        ("unknown-class", names.CLASS_LABEL),
        ("unknown-dataset", names.DATASET_LABEL),
        ("unknown-reservation", names.RESERVATION_LABEL),
    ]
    for name, label in unknown:
        cases.append(Case(name, pod({label: "no-such-thing"}), refused_by=VALIDATION_POLICY))
    own = pod(
        tolerations=[{"key": "example.com/x", "operator": "Exists"}],
        nodeSelector={"kubernetes.io/os": "linux"},
    )
    cases.append(Case("own-toleration-and-node-selector", own))
    first = next(iter(pools))
    named = pod({names.CLASS_LABEL: first}, priorityClassName="system-cluster-critical")
    cases.append(Case("own-priority-class", named))
    cases.append(Case("kube-system-left-alone", pod(), namespace="kube-system"))
    return cases


def _reservation_cases(expanded: dict[str, Any], rendering: Rendering) -> list[Case]:
    """Each reservation by its first user (and with the GPU class: both mutating policies
    add a toleration), a stranger and a controller."""
    gpu_class = _resource_classes(rendering).get("nvidia.com/gpu")
    cases = []
    for name, spec in (expanded["scheduler"].get("reservations") or {}).items():
        declared = pod({names.RESERVATION_LABEL: str(name)})
        for user in [str(u) for u in spec.get("users") or []][:1]:
            cases.append(Case(f"reservation-{name}-by-{user}", declared, user=user))
            if gpu_class:
                both = pod({names.RESERVATION_LABEL: str(name), names.CLASS_LABEL: gpu_class})
                cases.append(
                    Case(f"reservation-{name}-by-{user}-class-{gpu_class}", both, user=user)
                )
        cases.append(
            Case(
                f"reservation-{name}-by-a-stranger",
                declared,
                user=STRANGER,
                refused_by=VALIDATION_POLICY,
            )
        )
        cases.append(Case(f"reservation-{name}-by-a-controller", declared, user=CONTROLLER))
    return cases


def _quota(rendering: Rendering, namespace: str, name: str) -> dict[str, Any] | None:
    for quota in _objects(rendering, "ResourceQuota"):
        if quota["metadata"]["namespace"] == namespace and quota["metadata"]["name"] == name:
            return quota
    return None


def _member_cases(
    teams: dict[str, Any], team: str, allowed: list[str], denied: list[str], default: str
) -> list[Case]:
    """A member's pods: declared, undeclared (the default class, which the team may not be
    allowed), in another team's namespace, of a class the team may not use."""
    users = [str(u["name"]) for u in teams[team]["users"]]
    if not users:
        return []
    member, namespace = users[0], names.object_name(team)
    policy = f"cluster-plan-team-{namespace}-classes"
    found = [
        Case(f"team-{team}-member-pod", pod({names.CLASS_LABEL: allowed[0]}), namespace, member),
        Case(
            f"team-{team}-member-undeclared-pod",
            pod(),
            namespace,
            member,
            refused_by=None if default in allowed else policy,
        ),
    ]
    others = [t for t, s in teams.items() if member not in [u["name"] for u in s["users"]]]
    if others:
        where = names.object_name(others[0])
        found.append(
            Case(f"team-{team}-member-in-{others[0]}", pod(), where, member, refused_by="RBAC")
        )
    if denied:
        refused = pod({names.CLASS_LABEL: denied[0]})
        found.append(
            Case(f"team-{team}-class-{denied[0]}", refused, namespace, member, refused_by=policy)
        )
    return found


def _team_cases(expanded: dict[str, Any], rendering: Rendering) -> list[Case]:
    teams = expanded.get("teams") or {}
    pools = _pools(expanded, rendering)
    default = _default_class(rendering)
    found: list[Case] = []
    for team, spec in teams.items():
        namespace = names.object_name(team)
        allowed = [c for c in pools if c in spec["classes"]]
        denied = [c for c in pools if c not in spec["classes"]]
        found += _member_cases(teams, team, allowed, denied, default)
        found += _quota_cases(rendering, team, namespace, allowed, denied)
        found += _max_time_cases(rendering, team, namespace)
    return found


def _quota_cases(
    rendering: Rendering, team: str, namespace: str, allowed: list[str], denied: list[str]
) -> list[Case]:
    cases = []
    devices = _quota(rendering, namespace, "team-devices")
    gpu = "requests.nvidia.com/gpu"
    routed = _resource_classes(rendering)
    if devices and gpu in devices["spec"]["hard"] and routed.get("nvidia.com/gpu") in allowed:
        hard = int(devices["spec"]["hard"][gpu])
        cases.append(
            Case(f"team-{team}-at-gpu-quota", pod(limits={"nvidia.com/gpu": hard}), namespace)
        )
        over = pod(limits={"nvidia.com/gpu": hard + 1})
        cases.append(
            Case(f"team-{team}-over-gpu-quota", over, namespace, refused_by="ResourceQuota")
        )
    if denied and allowed and _quota(rendering, namespace, "team-classes"):
        sneaky = pod({names.CLASS_LABEL: allowed[0]}, priorityClassName=f"workload-{denied[0]}")
        cases.append(
            Case(
                f"team-{team}-names-priority-class-of-{denied[0]}",
                sneaky,
                namespace,
                refused_by="ResourceQuota",
            )
        )
    return cases


def _resource_classes(rendering: Rendering) -> dict[str, str]:
    """Device resource -> the class the routing policy sends it to, read from the policy's
    `workloadClass` variable (`variables.asks_<resource> ? '<class>' : ...`)."""
    for policy in _objects(rendering, "MutatingAdmissionPolicy"):
        for variable in policy["spec"].get("variables") or []:
            if variable["name"] == "workloadClass":
                found = re.findall(r"variables\.asks_(\S+) \? '([^']+)'", variable["expression"])
                return {resource_name(var): wclass for var, wclass in found}
    return {}


def _default_class(rendering: Rendering) -> str:
    """The class of a pod that declares none and asks for no device: the routing policy's
    last fallback."""
    for policy in _objects(rendering, "MutatingAdmissionPolicy"):
        for variable in policy["spec"].get("variables") or []:
            if variable["name"] == "workloadClass":
                return str(re.findall(r"'([^']*)'", variable["expression"])[-1])
    return ""


def resource_name(variable: str) -> str:
    """`nvidia_com_gpu` -> `nvidia.com/gpu`, `cluster_plan_io_tpu` -> `cluster-plan.io/tpu`."""
    known = {"nvidia_com_": "nvidia.com/", "cluster_plan_io_": "cluster-plan.io/"}
    for prefix, real in known.items():
        if variable.startswith(prefix):
            return real + variable.removeprefix(prefix)
    return variable


def _max_time_cases(rendering: Rendering, team: str, namespace: str) -> list[Case]:
    policy = f"cluster-plan-team-{namespace}-max-time"
    policies = [
        o
        for o in _objects(rendering, "ValidatingAdmissionPolicy")
        if o["metadata"]["name"] == policy
    ]
    if not policies:
        return []
    seconds = int(policies[0]["spec"]["validations"][0]["expression"].rsplit(" ", 1)[-1])
    return [
        Case(
            f"team-{team}-job-without-deadline", job(), namespace, resource=JOBS, refused_by=policy
        ),
        Case(
            f"team-{team}-job-over-deadline",
            job(seconds + 1),
            namespace,
            resource=JOBS,
            refused_by=policy,
        ),
        Case(f"team-{team}-job-within-deadline", job(seconds), namespace, resource=JOBS),
    ]


def _example_cases(rendering: Rendering) -> list[Case]:
    """The pods of the example Jobs' templates, as the Job controller creates them."""
    found = []
    for obj in rendering.example_objects():
        if obj["kind"] == "Job":
            template = obj["spec"]["template"]
            body = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", **copy.deepcopy(template.get("metadata") or {})},
                "spec": copy.deepcopy(template["spec"]),
            }
            found.append(Case(f"example-{obj['metadata']['name']}-pod", body, user=CONTROLLER))
    return found


def cases(expanded: dict[str, Any], rendering: Rendering) -> list[Case]:
    found = [
        *_routing_cases(expanded, rendering),
        *_example_cases(rendering),
        *_reservation_cases(expanded, rendering),
        *_team_cases(expanded, rendering),
    ]
    duplicates = {c.name for c in found if [d.name for d in found].count(c.name) > 1}
    if duplicates:
        raise ValueError(f"cases named twice: {sorted(duplicates)}")
    return found


# --- the comparison ---

_POLICY = re.compile(
    r"ValidatingAdmissionPolicy '(?P<policy>[^']+)' with binding '[^']+' denied request: "
    r"(?P<message>.*)$",
    re.S,
)


def refusal_of(message: str) -> Refusal:
    """Who refused, from a Status message of the API server."""
    if match := _POLICY.search(message):
        return Refusal(match["policy"], match["message"])
    _, _, reason = message.partition(" is forbidden: ")
    reason = reason or message
    if reason.startswith("User "):
        return Refusal("RBAC", reason)
    if reason.startswith("exceeded quota: "):
        return Refusal("ResourceQuota", reason)
    if reason.startswith("the integer value of priority") or "PriorityClass" in reason:
        return Refusal("Priority", reason)
    if "runtimeClass" in reason or "runtimeclass" in reason:
        return Refusal("RuntimeClass", reason)
    return Refusal("API server", message)


def policy_view(obj: dict[str, Any]) -> dict[str, Any]:
    """The parts of an admitted pod the policies and the plugins around them touch; nothing
    of a Job (its policy only refuses; the API server labels it for its controller)."""
    if obj.get("kind") != "Pod":
        return {}
    spec = obj["spec"]
    return {
        "labels": (obj.get("metadata") or {}).get("labels") or {},
        "nodeSelector": spec.get("nodeSelector") or {},
        "tolerations": sorted(spec.get("tolerations") or [], key=canonical),
        "priorityClassName": spec.get("priorityClassName", ""),
        "priority": spec.get("priority"),
        "runtimeClassName": spec.get("runtimeClassName", ""),
        "affinity": spec.get("affinity") or {},
    }


def differences(real: Outcome, model: Outcome) -> list[str]:
    """Empty when the two agree: both refused, the real refusal one of the model's (the
    server reports one policy of several, in no fixed order), or both admitted with the same
    view."""
    if real.refusals or model.refusals:
        if not real.refusals:
            return [f"the API server admitted it; the model refused it: {model.refusals}"]
        if not model.refusals:
            return [f"the API server refused it ({real.refusals[0]}); the model admitted it"]
        if real.refusals[0] not in model.refusals:
            return [f"refused by the API server as {real.refusals[0]}; the model: {model.refusals}"]
        return []
    assert real.admitted is not None and model.admitted is not None
    ours, theirs = policy_view(model.admitted), policy_view(real.admitted)
    return [
        f"{key}: API server {canonical(theirs[key])}, model {canonical(ours[key])}"
        for key in theirs
        if canonical(theirs[key]) != canonical(ours[key])
    ]


def expectation_problems(case: Case, outcome: Outcome) -> list[str]:
    """Where an outcome is not what the plan wants for the case."""
    if case.refused_by is None:
        return [f"{case.name}: refused: {outcome.refusals}"] if outcome.refusals else []
    if not outcome.refusals:
        return [f"{case.name}: admitted; the plan wants it refused by {case.refused_by}"]
    if case.refused_by not in {r.by for r in outcome.refusals}:
        return [f"{case.name}: refused by {outcome.refusals}, not by {case.refused_by}"]
    return []


def body_for(case: Case) -> dict[str, Any]:
    """The case's object as sent (a copy: a case is shared)."""
    return copy.deepcopy(case.body)
