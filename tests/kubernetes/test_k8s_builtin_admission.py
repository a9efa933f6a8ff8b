"""The model of the API server's own admission steps around the policies
(k8s_builtin_admission), each against what kube-apiserver 1.36.3 did with the same input
(test_k8s_apiserver.py compares whole decisions)."""

from __future__ import annotations

from typing import Any

from k8s_admission import Admission
from k8s_builtin_admission import Builtins, Refusal, pod_usage
from k8s_plans import rendered

NOT_READY = {
    "key": "node.kubernetes.io/not-ready",
    "operator": "Exists",
    "effect": "NoExecute",
    "tolerationSeconds": 300,
}
UNREACHABLE = {**NOT_READY, "key": "node.kubernetes.io/unreachable"}
CLASS = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "value": 100}


def pod(limits: dict[str, int] | None = None, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "registry.example/app:1"}
    if limits:
        container["resources"] = {"limits": {k: str(v) for k, v in limits.items()}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [container], **spec}}  # fmt: skip


def test_priority_resolves_the_class_and_refuses_another_value() -> None:
    builtins = Builtins([{**CLASS, "metadata": {"name": "workload-x"}}])
    plain = pod()
    assert builtins.mutate(plain) is None
    assert plain["spec"]["priority"] == 0 and "priorityClassName" not in plain["spec"]
    named = pod(priorityClassName="workload-x")
    assert builtins.mutate(named) is None
    assert named["spec"]["priority"] == 100
    assert named["spec"]["preemptionPolicy"] == "PreemptLowerPriority"
    # a class set later with the value of the first pass: the second pass refuses it
    plain["spec"]["priorityClassName"] = "workload-x"
    refused = builtins.mutate(plain)
    assert refused == Refusal(
        "Priority",
        "the integer value of priority (0) must not be provided in pod spec; priority "
        "admission controller computed 100 from the given PriorityClass name",
    )
    assert builtins.mutate(pod(priorityClassName="nope")) == Refusal(
        "Priority", "no PriorityClass with name nope was found"
    )


def test_default_tolerations_are_added_once() -> None:
    builtins = Builtins([])
    admitted = pod()
    builtins.mutate(admitted)
    assert admitted["spec"]["tolerations"] == [NOT_READY, UNREACHABLE]
    builtins.mutate(admitted)
    assert admitted["spec"]["tolerations"] == [NOT_READY, UNREACHABLE]
    everything = pod(tolerations=[{"operator": "Exists"}])
    builtins.mutate(everything)
    assert everything["spec"]["tolerations"] == [{"operator": "Exists"}]


def test_a_runtime_class_s_scheduling_is_merged_or_conflicts() -> None:
    builtins = Builtins(rendered("lab-k8s").all_objects())
    gpu = pod(runtimeClassName="nvidia", nodeSelector={"cluster-plan.io/pool": "gpu"})
    assert builtins.mutate(gpu) is None
    assert gpu["spec"]["nodeSelector"] == {
        "cluster-plan.io/pool": "gpu",
        "nvidia.com/gpu.present": "true",
    }
    conflict = pod(runtimeClassName="nvidia", nodeSelector={"nvidia.com/gpu.present": "false"})
    assert builtins.mutate(conflict) == Refusal(
        "RuntimeClass",
        "conflict: runtimeClass.scheduling.nodeSelector[nvidia.com/gpu.present] = true; "
        "pod.spec.nodeSelector[nvidia.com/gpu.present] = false",
    )


def test_a_pod_routed_to_the_gpus_gets_the_runtime_class_s_selector_on_the_second_pass() -> None:
    """The routing policy sets RuntimeClass nvidia after the plugins ran: they run again."""
    lab = rendered("lab-k8s").all_objects()
    decision = Admission(lab, builtins=True).admit(
        pod(limits={"nvidia.com/gpu": 1}), "team", "kubernetes-admin", groups=("system:masters",)
    )
    assert decision.refusals == ()
    spec = decision.pod["spec"]
    assert spec["nodeSelector"]["nvidia.com/gpu.present"] == "true"
    assert (spec["priorityClassName"], spec["priority"]) == ("workload-training", 100)
    assert NOT_READY in spec["tolerations"]
    # the policies alone, as the routing tests run them: neither
    alone = Admission(lab).admit(pod(limits={"nvidia.com/gpu": 1}), "team").pod["spec"]
    assert "nvidia.com/gpu.present" not in alone["nodeSelector"]
    assert NOT_READY not in alone["tolerations"]


def test_rbac_lets_members_and_masters_create_pods() -> None:
    builtins = Builtins(rendered("k8s-inference").all_objects())
    assert builtins.rbac_refusal("ines", ("system:authenticated",), "search", []) is None
    assert builtins.rbac_refusal("ines", ("system:authenticated",), "assistants", []) == Refusal(
        "RBAC",
        'User "ines" cannot create resource "pods" in API group "" in the namespace "assistants"',
    )
    assert builtins.rbac_refusal("root", ("system:masters",), "assistants", []) is None


def test_quota_counts_requests_and_names_what_is_exceeded() -> None:
    builtins = Builtins(rendered("k8s-inference").all_objects())
    assert pod_usage(pod(limits={"nvidia.com/gpu": 3})) == {
        "pods": 1,
        "requests.nvidia.com/gpu": 3,
    }
    assert builtins.quota_refusal(pod(limits={"nvidia.com/gpu": 16}), "search") is None
    assert builtins.quota_refusal(pod(limits={"nvidia.com/gpu": 17}), "search") == Refusal(
        "ResourceQuota",
        "exceeded quota: team-devices, requested: requests.nvidia.com/gpu=17, used: "
        "requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=16",
    )
    tpu = pod(priorityClassName="workload-inference-tpu")
    assert builtins.quota_refusal(tpu, "search") == Refusal(
        "ResourceQuota",
        "exceeded quota: team-classes, requested: pods=1, used: pods=0, limited: pods=0",
    )
