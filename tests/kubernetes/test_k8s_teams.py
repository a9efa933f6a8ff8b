"""The plan's teams as Kubernetes objects (cluster_plan/kubernetes/teams.py, rendered into
objects/15-teams.yaml and kept with the other golden files by test_k8s_golden): validated
strictly for every supported release, and checked for what they mean: namespaces, members,
device quotas, classes, and the max-time policy run with a CEL library."""

from __future__ import annotations

import copy
from typing import Any

import celpy
import pytest
from k8s_admission import Admission
from k8s_plans import expanded_plan, rendered
from test_k8s_objects import api_problems
from test_k8s_routing import pod

from cluster_plan.kubernetes import render
from cluster_plan.kubernetes.teams import max_seconds
from cluster_plan.kubernetes.versions import SUPPORTED

PLAN = "k8s-inference"  # teams with users, a parent, device limits, classes and a max_time
TEAMS = "15-teams"


def teams_of(expanded: dict[str, Any]) -> list[dict[str, Any]]:
    return render(expanded).objects.get(TEAMS, [])


@pytest.fixture
def expanded() -> dict[str, Any]:
    """The plan, expanded (a copy: a test may change it)."""
    return expanded_plan(PLAN)


def by_kind(objects: list[dict[str, Any]], kind: str, namespace: str | None = None):
    return [
        o
        for o in objects
        if o["kind"] == kind and (namespace is None or o["metadata"].get("namespace") == namespace)
    ]


def named(objects: list[dict[str, Any]], kind: str, namespace: str, name: str):
    return [o for o in by_kind(objects, kind, namespace) if o["metadata"]["name"] == name]


@pytest.mark.parametrize("version", SUPPORTED)
def test_every_team_object_validates_strictly(version):
    expanded = expanded_plan(PLAN)
    expanded["scheduler"]["kubernetes"]["version"] = version
    objects = teams_of(expanded)
    assert {o["kind"] for o in objects} == {
        "Namespace",
        "RoleBinding",
        "ResourceQuota",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
    assert api_problems(objects, version) == []


def test_validation_is_strict():
    objects = rendered(PLAN).objects[TEAMS]
    quota = copy.deepcopy(by_kind(objects, "ResourceQuota")[0])
    assert api_problems([quota], "1.36") == []
    quota["spec"]["hrad"] = quota["spec"].pop("hard")
    assert api_problems([quota], "1.36") != []
    quota = copy.deepcopy(by_kind(objects, "ResourceQuota")[0])
    quota["spec"]["hard"] = 5
    assert api_problems([quota], "1.36") != []


def test_namespaces_come_before_their_objects():
    rendering = rendered(PLAN)
    stems = sorted(rendering.objects)
    assert stems.index(TEAMS) < stems.index("30-admission")
    kinds = [o["kind"] for o in rendering.objects[TEAMS]]
    last_namespace = max(i for i, k in enumerate(kinds) if k == "Namespace")
    assert "Namespace" not in kinds[last_namespace + 1 :]
    assert all(k == "Namespace" for k in kinds[: last_namespace + 1])


def test_a_namespace_per_team_and_its_users_bound_in_it(expanded):
    objects = teams_of(expanded)
    namespaces = [o["metadata"]["name"] for o in by_kind(objects, "Namespace")]
    assert namespaces == list(expanded["teams"])
    for team, spec in expanded["teams"].items():
        (binding,) = by_kind(objects, "RoleBinding", team)
        assert binding["roleRef"]["name"] == "edit"
        assert [s["name"] for s in binding["subjects"]] == [u["name"] for u in spec["users"]]
        assert all(s["kind"] == "User" for s in binding["subjects"])
    # a team without users gets its namespace and no binding
    expanded["teams"]["search"]["users"] = []
    objects = teams_of(expanded)
    assert by_kind(objects, "Namespace")[0]["metadata"]["name"] == "search"
    assert by_kind(objects, "RoleBinding", "search") == []


def test_device_quotas_follow_the_limits_and_the_ancestors(expanded):
    objects = teams_of(expanded)

    def hard(team: str) -> dict[str, str]:
        (quota,) = named(objects, "ResourceQuota", team, "team-devices")
        return quota["spec"]["hard"]

    assert hard("search") == {"requests.nvidia.com/gpu": "16"}
    assert hard("assistants") == {
        "requests.cluster-plan.io/tpu": "4",
        "requests.nvidia.com/gpu": "12",
    }
    # the child's own 4 GPUs, and the parent's 4 TPUs it may not exceed either
    assert hard("assistants-eval") == {
        "requests.cluster-plan.io/tpu": "4",
        "requests.nvidia.com/gpu": "4",
    }
    wider = copy.deepcopy(expanded)
    wider["teams"]["assistants-eval"]["limits"]["gpus"] = 20  # more than its parent's 12
    (quota,) = named(teams_of(wider), "ResourceQuota", "assistants-eval", "team-devices")
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "12"
    expanded["teams"]["search"]["limits"]["gpus"] = None
    unlimited = teams_of(expanded)
    assert named(unlimited, "ResourceQuota", "search", "team-devices") == []


def limit_range_defaults(limit_range: dict[str, Any]) -> dict[str, str]:
    """What the API server puts into a container that gives no limit, per resource: a stored
    Container LimitRange's `default` is its `default`, else its `max` (SetDefaults_LimitRangeItem,
    k8s.io/kubernetes pkg/apis/core/v1/defaults.go), and LimitRanger sets it as the limit and,
    from `defaultRequest` (defaulted from `default`), as the request."""
    out: dict[str, str] = {}
    for item in limit_range["spec"]["limits"]:
        if item["type"] == "Container":
            out.update({**item.get("max", {}), **item.get("default", {})})
    return out


def test_no_team_object_gives_pods_devices_they_did_not_ask_for():
    """A LimitRange's `max` becomes every container's default limit and request: a CPU pod
    in the team's namespace would ask for the team's whole GPU quota, and be routed to the
    GPU class for it (a real API server did both). The device ResourceQuota alone refuses a
    pod asking for more than the team may hold."""
    for plan in ("k8s-inference", "lab-as-kubernetes"):
        for limit_range in by_kind(rendered(plan).objects.get(TEAMS, []), "LimitRange"):
            devices = {r for r in limit_range_defaults(limit_range) if "/" in r}
            assert not devices, (plan, limit_range["metadata"], devices)


def test_classes_a_team_may_not_use_get_a_zero_pod_quota(expanded):
    rendering = render(expanded)
    objects = rendering.objects[TEAMS]
    served = [pc["metadata"]["name"] for pc in rendering.objects["10-priority-classes"]]
    checked = 0
    for team, spec in expanded["teams"].items():
        denied = [
            f"workload-{c}"
            for c in expanded["scheduler"]["workload_classes"]
            if c not in spec["classes"]
        ]
        quotas = named(objects, "ResourceQuota", team, "team-classes")
        if not denied:
            assert quotas == [], team
            continue
        (quota,) = quotas
        assert quota["spec"]["hard"] == {"pods": "0"}
        (selector,) = quota["spec"]["scopeSelector"]["matchExpressions"]
        assert selector == {"scopeName": "PriorityClass", "operator": "In", "values": denied}
        assert set(denied) <= set(served)  # the quota names PriorityClasses that exist
        checked += 1
    assert checked


def test_a_team_that_may_use_every_class_has_no_class_quota(expanded):
    expanded["teams"]["search"]["classes"] = list(expanded["scheduler"]["workload_classes"])
    assert named(teams_of(expanded), "ResourceQuota", "search", "team-classes") == []


def test_a_plan_without_teams_has_no_team_objects(expanded):
    expanded["teams"] = {}
    assert TEAMS not in render(expanded).objects


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("04:00:00", 14400), ("1-00:00:00", 86400), ("2-12", 216000), ("1-02:30", 95400),
     ("90", 5400), ("30:15", 1815), ("UNLIMITED", None)],
)  # fmt: skip
def test_max_seconds(text, seconds):
    assert max_seconds(text) == seconds


def cel(expression: str, job: dict[str, Any]) -> bool:
    env = celpy.Environment()
    program = env.program(env.compile(expression))
    return bool(program.evaluate({"object": celpy.json_to_cel(job)}))


def is_max_time(policy: dict[str, Any]) -> bool:
    return policy["metadata"]["name"].endswith("-max-time")


def test_the_max_time_policy_admits_only_jobs_with_a_short_enough_deadline(expanded):
    objects = teams_of(expanded)
    (policy,) = [p for p in by_kind(objects, "ValidatingAdmissionPolicy") if is_max_time(p)]
    (binding,) = [
        b
        for b in by_kind(objects, "ValidatingAdmissionPolicyBinding")
        if b["spec"]["policyName"] == policy["metadata"]["name"]
    ]
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert policy["spec"]["matchConstraints"]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "assistants-eval"
    }
    (rule,) = policy["spec"]["validations"]
    job = {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"spec": {}}}}
    assert cel(rule["expression"], job) is False
    assert cel(rule["expression"], {**job, "spec": {"activeDeadlineSeconds": 14400}}) is True
    assert cel(rule["expression"], {**job, "spec": {"activeDeadlineSeconds": 14401}}) is False
    assert "teams.assistants-eval.limits.max_time: 04:00:00" in rule["message"]
    # a child inherits its parent's shorter limit
    expanded["teams"]["assistants"]["limits"]["max_time"] = "01:00:00"
    policies = [
        p for p in by_kind(teams_of(expanded), "ValidatingAdmissionPolicy") if is_max_time(p)
    ]
    assert {
        p["metadata"]["name"]: p["spec"]["validations"][0]["expression"].split()[-1]
        for p in policies
    } == {
        "cluster-plan-team-assistants-max-time": "3600",
        "cluster-plan-team-assistants-eval-max-time": "3600",
    }


def test_a_pod_of_a_class_its_team_may_not_use_is_refused_naming_the_rule():
    """The whole admission chain (routing, then the team's policy), evaluated with cel-python:
    a TPU pod is routed to inference-tpu, which search may not use."""
    admission = Admission(rendered(PLAN).all_objects())
    refused = "team 'search' may not use workload class inference-tpu"
    rule = "(teams.search.classes: inference-gpu, general)"
    tpu = admission.admit(pod(limits={"cluster-plan.io/tpu": 1}), namespace="search")
    assert tpu.denied == f"{refused} {rule}"
    declared = pod({"cluster-plan.io/workload-class": "inference-tpu"})
    assert admission.admit(declared, namespace="search").denied == f"{refused} {rule}"
    for allowed in (pod(limits={"nvidia.com/gpu": 1}), pod()):  # inference-gpu, general
        decision = admission.admit(allowed, namespace="search")
        assert decision.denied is None
        assert decision.pod["metadata"]["labels"]["cluster-plan.io/workload-class"] in (
            "inference-gpu",
            "general",
        )
    # assistants may use every class; other namespaces are not the team's
    assert admission.admit(pod(limits={"cluster-plan.io/tpu": 1}), "assistants").denied is None
    assert admission.admit(pod(limits={"cluster-plan.io/tpu": 1}), "default").denied is None
