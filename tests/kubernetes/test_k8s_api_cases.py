"""The admission cases (k8s_api_cases) decided by the offline model alone, with the API
server's own plugins around the policies (k8s_builtin_admission): each ends as the plan
wants. test_k8s_apiserver.py runs the same cases against a real API server and compares.
Also the comparison itself: it must see every kind of difference."""

from __future__ import annotations

import pytest
from k8s_admission import Admission
from k8s_api_cases import (
    ADMIN,
    VALIDATION_POLICY,
    Case,
    Outcome,
    cases,
    differences,
    expectation_problems,
    fixture_objects,
    pod,
    refusal_of,
    resource_name,
)
from k8s_builtin_admission import Refusal
from k8s_plans import PLANS, expanded_plan, rendered

from cluster_plan.kubernetes import names


def decide(admission: Admission, case: Case, extra: list[dict]) -> Outcome:
    decision = admission.admit(
        case.body,
        case.namespace,
        case.user,
        groups=case.groups,
        resource=case.resource,
        bindings=tuple(o for o in extra if o["kind"] == "RoleBinding"),
    )
    if decision.refusals:
        return Outcome(refusals=decision.refusals)
    return Outcome(admitted=decision.pod)


@pytest.mark.parametrize("plan", sorted(PLANS))
def test_every_case_ends_as_the_plan_wants(plan: str) -> None:
    expanded = expanded_plan(plan)
    rendering = rendered(plan)
    admission = Admission(rendering.all_objects(), builtins=True)
    extra = fixture_objects(expanded)
    found = cases(expanded, rendering)
    problems = [p for c in found for p in expectation_problems(c, decide(admission, c, extra))]
    assert problems == []


def test_the_cases_cover_every_kind_of_decision() -> None:
    refused_by = set()
    names_ = set()
    for plan in PLANS:
        for case in cases(expanded_plan(plan), rendered(plan)):
            refused_by.add(case.refused_by)
            names_.add(case.name)
    assert {None, VALIDATION_POLICY, "RBAC", "ResourceQuota"} <= refused_by
    assert any(str(r).endswith("-classes") for r in refused_by)
    assert any(str(r).endswith("-max-time") for r in refused_by)
    expanded = expanded_plan("lab-k8s")
    for wclass in expanded["scheduler"]["workload_classes"]:
        assert f"class-{wclass}" in names_
    assert {"undeclared", "asks-nvidia.com/gpu", "asks-cluster-plan.io/tpu"} <= names_
    assert {"class-general-asks-pool-gpu", "reservation-maintenance-by-a-stranger"} <= names_


def test_a_pool_other_than_the_class_s_is_refused_naming_both() -> None:
    admission = Admission(rendered("lab-k8s").all_objects(), builtins=True)
    wrong = pod({names.CLASS_LABEL: "general"}, nodeSelector={names.POOL_LABEL: "gpu"})
    decision = admission.admit(wrong, "team", ADMIN, groups=("system:masters",))
    assert decision.refusals == (
        Refusal(
            VALIDATION_POLICY,
            "workload class general runs on pool cpu, not gpu (nodeSelector "
            "cluster-plan.io/pool); declare the class of the pool "
            "(cluster-plan.io/workload-class) instead",
        ),
    )
    # undeclared, the pod is of the default class: the same refusal
    undeclared = pod(nodeSelector={names.POOL_LABEL: "gpu"})
    assert admission.admit(undeclared, "team", ADMIN, groups=("system:masters",)).refusals


def test_the_api_server_s_messages_are_read_back() -> None:
    vap = (
        "pods \"p\" is forbidden: ValidatingAdmissionPolicy 'cluster-plan-workload-declarations' "
        "with binding 'cluster-plan-workload-declarations' denied request: unknown workload "
        "class nope in label cluster-plan.io/workload-class; the plan has: a, b"
    )
    assert refusal_of(vap) == Refusal(
        "cluster-plan-workload-declarations",
        "unknown workload class nope in label cluster-plan.io/workload-class; the plan has: a, b",
    )
    rbac = (
        'pods is forbidden: User "ines" cannot create resource "pods" in API group "" in the '
        'namespace "assistants"'
    )
    assert refusal_of(rbac) == Refusal("RBAC", rbac.split("forbidden: ", 1)[1])
    quota = (
        'pods "p" is forbidden: exceeded quota: team-devices, requested: '
        "requests.nvidia.com/gpu=17, used: requests.nvidia.com/gpu=0, limited: "
        "requests.nvidia.com/gpu=16"
    )
    assert refusal_of(quota).by == "ResourceQuota"
    assert refusal_of("something else").by == "API server"


def test_the_comparison_sees_every_difference() -> None:
    admitted = pod(
        {"a": "1"},
        nodeSelector={"p": "x"},
        tolerations=[{"key": "k1", "operator": "Exists"}, {"key": "k2", "operator": "Exists"}],
        priority=5,
    )
    same = Outcome(admitted=admitted)
    reordered = pod(
        {"a": "1"},
        nodeSelector={"p": "x"},
        tolerations=[{"key": "k2", "operator": "Exists"}, {"key": "k1", "operator": "Exists"}],
        priority=5,
    )
    assert differences(same, Outcome(admitted=reordered)) == []
    other = pod({"a": "2"}, nodeSelector={"p": "y"}, priority=5)
    found = differences(same, Outcome(admitted=other))
    assert [d.split(":")[0] for d in found] == ["labels", "nodeSelector", "tolerations"]
    refused = Outcome(refusals=(Refusal("x", "no"),))
    assert differences(same, refused) and differences(refused, same)
    assert differences(refused, Outcome(refusals=(Refusal("x", "no"), Refusal("y", "n")))) == []
    assert differences(refused, Outcome(refusals=(Refusal("x", "other words"),)))


def test_the_expectations_are_checked() -> None:
    case = Case("c", pod(), refused_by="RBAC")
    assert expectation_problems(case, Outcome(admitted=pod()))
    assert expectation_problems(case, Outcome(refusals=(Refusal("Quota", "x"),)))
    assert expectation_problems(case, Outcome(refusals=(Refusal("RBAC", "x"),))) == []
    assert expectation_problems(Case("d", pod()), Outcome(refusals=(Refusal("x", "y"),)))


def test_resource_names_from_policy_variables() -> None:
    assert resource_name("nvidia_com_gpu") == "nvidia.com/gpu"
    assert resource_name("cluster_plan_io_tpu") == "cluster-plan.io/tpu"
