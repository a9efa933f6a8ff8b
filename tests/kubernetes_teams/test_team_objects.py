"""The plan's teams as Kubernetes objects (cluster_plan/kubernetes_teams): kept as golden files,
validated offline and strictly (an unknown field is an error) with kubernetes-validate against
the plan's Kubernetes version and the releases the Kubernetes renderer supports, and checked for
what they mean: quotas, classes, members, and the max-time policy run with a CEL library.

Regenerate the golden files after an intended change with
    UPDATE_GOLDEN=1 .venv/bin/pytest tests/kubernetes_teams
and review the diff before committing it.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import celpy
import kubernetes_validate
import pytest
from kubernetes_validate.utils import SchemaNotFoundError, ValidationError

from cluster_plan.api import load_expanded
from cluster_plan.kubernetes_teams import dump_documents, team_objects
from cluster_plan.kubernetes_teams.objects import max_seconds

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "golden"
PLANS = {"k8s-inference": ROOT / "inventory" / "examples" / "k8s-inference.yml"}
# the releases cluster_plan/kubernetes renders for (its versions.SUPPORTED)
RELEASES = ["1.32", "1.33", "1.34", "1.35", "1.36", "1.37"]
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


@pytest.fixture(scope="module")
def expanded() -> dict[str, Any]:
    return dict(load_expanded(PLANS["k8s-inference"]))


def api_problems(objects: list[dict[str, Any]], version: str) -> list[str]:
    problems = []
    for obj in objects:
        where = f"{obj['kind']}/{obj['metadata']['name']}"
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except ValidationError as exc:
            problems.append(f"{where}: {'.'.join(map(str, exc.path))}: {exc.message}")
        except SchemaNotFoundError as exc:
            problems.append(f"{where}: {exc.message}")
    return problems


def by_kind(objects: list[dict[str, Any]], kind: str, namespace: str | None = None):
    return [
        o
        for o in objects
        if o["kind"] == kind and (namespace is None or o["metadata"].get("namespace") == namespace)
    ]


@pytest.mark.parametrize("plan", sorted(PLANS))
def test_objects_equal_their_golden_file(plan):
    text = dump_documents(team_objects(load_expanded(PLANS[plan])))
    golden = GOLDEN / f"{plan}.yaml"
    if UPDATE:
        golden.write_text(text)
    assert golden.exists(), f"no golden file {golden}; run with UPDATE_GOLDEN=1"
    assert text == golden.read_text()


@pytest.mark.parametrize("version", sorted({"plan", *RELEASES}))
def test_every_object_validates_strictly(expanded, version):
    objects = team_objects(expanded)
    assert {o["kind"] for o in objects} == {
        "Namespace",
        "RoleBinding",
        "ResourceQuota",
        "LimitRange",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
    if version == "plan":
        version = expanded["scheduler"]["kubernetes"]["version"]
    assert api_problems(objects, version) == []


def test_validation_is_strict(expanded):
    quota = copy.deepcopy(by_kind(team_objects(expanded), "ResourceQuota")[0])
    assert api_problems([quota], "1.36") == []
    quota["spec"]["hrad"] = quota["spec"].pop("hard")
    assert api_problems([quota], "1.36") != []
    limit_range = copy.deepcopy(by_kind(team_objects(expanded), "LimitRange")[0])
    limit_range["spec"]["limits"][0]["type"] = 5
    assert api_problems([limit_range], "1.36") != []


def test_a_namespace_per_team_and_its_users_bound_in_it(expanded):
    objects = team_objects(expanded)
    namespaces = [o["metadata"]["name"] for o in by_kind(objects, "Namespace")]
    assert namespaces == list(expanded["teams"])
    for team, spec in expanded["teams"].items():
        (binding,) = by_kind(objects, "RoleBinding", team)
        assert binding["roleRef"]["name"] == "edit"
        assert [s["name"] for s in binding["subjects"]] == [u["name"] for u in spec["users"]]
        assert all(s["kind"] == "User" for s in binding["subjects"])
    # a team without users gets its namespace and no binding
    expanded = copy.deepcopy(expanded)
    expanded["teams"]["search"]["users"] = []
    objects = team_objects(expanded)
    assert by_kind(objects, "Namespace")[0]["metadata"]["name"] == "search"
    assert by_kind(objects, "RoleBinding", "search") == []


def test_device_quotas_follow_the_limits_and_the_ancestors(expanded):
    objects = team_objects(expanded)

    def hard(team: str) -> dict[str, str]:
        (quota,) = [
            q
            for q in by_kind(objects, "ResourceQuota", team)
            if q["metadata"]["name"] == "team-devices"
        ]
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
    (limits,) = by_kind(objects, "LimitRange", "assistants-eval")
    assert limits["spec"]["limits"] == [
        {"type": "Container", "max": {"cluster-plan.io/tpu": "4", "nvidia.com/gpu": "4"}}
    ]
    wider = copy.deepcopy(expanded)
    wider["teams"]["assistants-eval"]["limits"]["gpus"] = 20  # more than its parent's 12
    (quota,) = [
        q
        for q in by_kind(team_objects(wider), "ResourceQuota", "assistants-eval")
        if q["metadata"]["name"] == "team-devices"
    ]
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "12"
    unlimited = copy.deepcopy(expanded)
    unlimited["teams"]["search"]["limits"]["gpus"] = None
    assert [
        q
        for q in by_kind(team_objects(unlimited), "ResourceQuota", "search")
        if q["metadata"]["name"] == "team-devices"
    ] == []
    assert by_kind(team_objects(unlimited), "LimitRange", "search") == []


def test_classes_a_team_may_not_use_get_a_zero_pod_quota(expanded):
    objects = team_objects(expanded)
    for team, spec in expanded["teams"].items():
        denied = [
            f"workload-{c}"
            for c in expanded["scheduler"]["workload_classes"]
            if c not in spec["classes"]
        ]
        quotas = [
            q
            for q in by_kind(objects, "ResourceQuota", team)
            if q["metadata"]["name"] == "team-classes"
        ]
        if not denied:
            assert quotas == [], team
            continue
        (quota,) = quotas
        assert quota["spec"]["hard"] == {"pods": "0"}
        (selector,) = quota["spec"]["scopeSelector"]["matchExpressions"]
        assert selector == {"scopeName": "PriorityClass", "operator": "In", "values": denied}


def test_a_slurm_plan_has_no_kubernetes_objects():
    assert team_objects(load_expanded(ROOT / "inventory" / "lab" / "cluster.yml")) == []


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


def test_the_max_time_policy_admits_only_jobs_with_a_short_enough_deadline(expanded):
    objects = team_objects(expanded)
    (policy,) = by_kind(objects, "ValidatingAdmissionPolicy")
    (binding,) = by_kind(objects, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["matchResources"]["namespaceSelector"]["matchLabels"] == {
        "cluster-plan.io/team": "assistants-eval"
    }
    (rule,) = policy["spec"]["validations"]
    job = {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"spec": {}}}}
    assert cel(rule["expression"], job) is False
    assert cel(rule["expression"], {**job, "spec": {"activeDeadlineSeconds": 14400}}) is True
    assert cel(rule["expression"], {**job, "spec": {"activeDeadlineSeconds": 14401}}) is False
    assert "teams.assistants-eval.limits.max_time: 04:00:00" in rule["message"]
    # a child inherits its parent's shorter limit
    shorter = copy.deepcopy(expanded)
    shorter["teams"]["assistants"]["limits"]["max_time"] = "01:00:00"
    policies = by_kind(team_objects(shorter), "ValidatingAdmissionPolicy")
    assert {
        p["metadata"]["name"]: p["spec"]["validations"][0]["expression"].split()[-1]
        for p in policies
    } == {
        "cluster-plan-team-assistants-max-time": "3600",
        "cluster-plan-team-assistants-eval-max-time": "3600",
    }
