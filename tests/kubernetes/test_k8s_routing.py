"""The routing table, tested as data: for every workload class and dataset of every
Kubernetes plan, a pod goes through the generated admission policies (their CEL evaluated by
cel-python) and then through the scheduler's filters; it must land on exactly the nodes the
plan says. The expected nodes are computed here from the expanded plan alone, not from the
renderer."""

from __future__ import annotations

from typing import Any

import pytest
from k8s_admission import Admission, apply_patch, object_type_problems
from k8s_plans import PLANS, expanded_plan, rendered
from k8s_scheduling import feasible, preferred, tolerates

CLASS = "cluster-plan.io/workload-class"
DATASET = "cluster-plan.io/dataset"
RESERVATION = "cluster-plan.io/reservation"


def pod(labels: dict[str, str] | None = None, limits: dict[str, int] | None = None) -> dict:
    container: dict[str, Any] = {"name": "main", "image": "registry.example/app:1"}
    if limits:
        container["resources"] = {"limits": dict(limits)}
    meta: dict[str, Any] = {"name": "p"}
    if labels:
        meta["labels"] = dict(labels)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [container]},
    }


# --- what the plan says, computed without the renderer ---


def workers_of(expanded: dict, wclass: str) -> set[str]:
    pool = expanded["scheduler"]["workload_classes"][wclass]["pool"]
    return {
        h for h, s in expanded["hosts"].items() if "k8s_worker" in s["roles"] and s["pool"] == pool
    }


def served(expanded: dict) -> list[str]:
    return [c for c in expanded["scheduler"]["workload_classes"] if workers_of(expanded, c)]


def default_class(expanded: dict) -> str:
    classes = expanded["scheduler"]["workload_classes"]
    names = served(expanded)
    marked = [c for c in names if classes[c].get("default")]
    return (marked or [c for c in names if classes[c].get("needs") == "cpu"] or names)[0]


def device_resource(host: dict) -> str | None:
    accel = host.get("accelerators")
    if not accel:
        return None
    return (
        "nvidia.com/gpu" if accel["vendor"] == "nvidia" else f"cluster-plan.io/{accel['gres_type']}"
    )


def class_for_resource(expanded: dict, resource: str) -> str:
    classes = expanded["scheduler"]["workload_classes"]
    for name in served(expanded):
        if classes[name].get("needs") in ("gpu", "accelerator") and any(
            device_resource(expanded["hosts"][h]) == resource for h in workers_of(expanded, name)
        ):
            return name
    raise AssertionError(f"no class serves {resource}")


def capacity(expanded: dict) -> dict[str, dict[str, int]]:
    out = {}
    for name, host in expanded["hosts"].items():
        resource = device_resource(host)
        out[name] = {resource: int(host["accelerators"]["count"])} if resource else {}
    return out


def holders(expanded: dict, dataset: str) -> set[str]:
    racks = set(expanded["scheduler"]["datasets"][dataset]["racks"])
    return {h for h, s in expanded["hosts"].items() if s["rack"] in racks}


# --- the cases, one list per plan ---


def class_cases() -> list[tuple[str, str, str | None]]:
    cases = []
    for plan in sorted(PLANS):
        expanded = expanded_plan(plan)
        for wclass in served(expanded):
            cases.append((plan, wclass, None))
            for dataset in expanded["scheduler"].get("datasets") or {}:
                cases.append((plan, wclass, dataset))
    return cases


class Cluster:
    def __init__(self, plan: str):
        self.rendering = rendered(plan)
        self.expanded = expanded_plan(plan)
        self.admission = Admission(self.rendering.all_objects())
        self.nodes = [o for o in self.rendering.all_objects() if o["kind"] == "Node"]
        self.capacity = capacity(self.expanded)
        self.priority = {
            o["metadata"]["name"]: o["value"]
            for o in self.rendering.all_objects()
            if o["kind"] == "PriorityClass"
        }

    def place(self, pod_: dict, **kwargs: Any) -> tuple[dict, set[str]]:
        decision = self.admission.admit(pod_, **kwargs)
        assert decision.denied is None, decision.denied
        return decision.pod, set(feasible(decision.pod, self.nodes, self.capacity))


_CLUSTERS: dict[str, Cluster] = {}


def cluster(plan: str) -> Cluster:
    if plan not in _CLUSTERS:
        _CLUSTERS[plan] = Cluster(plan)
    return _CLUSTERS[plan]


@pytest.mark.parametrize(("plan", "wclass", "dataset"), class_cases())
def test_a_declared_class_lands_on_its_pool_and_prefers_its_dataset(plan, wclass, dataset):
    c = cluster(plan)
    labels = {CLASS: wclass, **({DATASET: dataset} if dataset else {})}
    admitted, nodes = c.place(pod(labels))
    assert nodes == workers_of(c.expanded, wclass)
    spec = admitted["spec"]
    assert spec["priority"] == c.expanded["scheduler"]["workload_classes"][wclass].get(
        "priority", 0
    )
    assert c.priority[spec["priorityClassName"]] == spec["priority"]
    best = set(preferred(admitted, c.nodes, sorted(nodes)))
    local = nodes & holders(c.expanded, dataset) if dataset else set()
    # a preference no node of the pool could meet is not set (as Slurm's --prefer)
    assert best == (local or nodes)
    terms = (
        (spec.get("affinity") or {})
        .get("nodeAffinity", {})
        .get("preferredDuringSchedulingIgnoredDuringExecution", [])
    )
    assert bool(terms) == bool(local)


@pytest.mark.parametrize("plan", sorted(PLANS))
def test_an_undeclared_pod_goes_where_its_devices_are_or_to_the_default_class(plan):
    c = cluster(plan)
    admitted, nodes = c.place(pod())
    default = default_class(c.expanded)
    assert admitted["metadata"]["labels"][CLASS] == default
    assert nodes == workers_of(c.expanded, default)
    resources = {device_resource(h) for h in c.expanded["hosts"].values()} - {None}
    assert resources, "every Kubernetes plan here has accelerators"
    for resource in sorted(resources):
        admitted, nodes = c.place(pod(limits={resource: 1}))
        wclass = class_for_resource(c.expanded, resource)
        assert admitted["metadata"]["labels"][CLASS] == wclass, resource
        assert nodes == workers_of(c.expanded, wclass), resource
        runtime = admitted["spec"].get("runtimeClassName")
        assert runtime == ("nvidia" if resource == "nvidia.com/gpu" else None)


@pytest.mark.parametrize("plan", sorted(PLANS))
def test_accelerator_pools_take_only_work_routed_to_them(plan):
    """A pod that pins itself to an accelerator pool without going through its class is
    kept off by the pool's taint."""
    c = cluster(plan)
    accelerated = {h for h, s in c.expanded["hosts"].items() if s.get("accelerators")}
    general = workers_of(c.expanded, default_class(c.expanded))
    assert accelerated and not accelerated & general
    raw = pod()
    raw["spec"]["tolerations"] = []
    assert not set(feasible(raw, c.nodes, c.capacity)) & accelerated
    control = {h for h, s in c.expanded["hosts"].items() if "k8s_control_plane" in s["roles"]}
    assert not set(feasible(raw, c.nodes, c.capacity)) & (control - general)


@pytest.mark.parametrize("plan", sorted(PLANS))
def test_unknown_declarations_are_refused_with_what_the_plan_has(plan):
    c = cluster(plan)
    decision = c.admission.admit(pod({CLASS: "no-such-class"}))
    assert decision.denied and "unknown workload class no-such-class" in decision.denied
    for wclass in served(c.expanded):
        assert wclass in decision.denied
    decision = c.admission.admit(pod({DATASET: "no-such-data"}))
    assert decision.denied and "unknown dataset no-such-data" in decision.denied
    decision = c.admission.admit(pod({RESERVATION: "no-such-window"}))
    assert decision.denied and "unknown reservation no-such-window" in decision.denied


@pytest.mark.parametrize("plan", sorted(PLANS))
def test_system_namespaces_are_left_alone(plan):
    decision = cluster(plan).admission.admit(pod(), namespace="kube-system")
    assert decision.denied is None
    assert decision.pod == pod()


@pytest.mark.parametrize("plan", sorted(PLANS))
def test_admission_twice_changes_nothing_more(plan):
    c = cluster(plan)
    for labels in ({}, {CLASS: served(c.expanded)[0]}):
        once = c.admission.admit(pod(labels, limits=None)).pod
        twice = c.admission.admit(once)
        assert twice.denied is None
        assert twice.pod == once


def test_a_reservation_admits_its_users_onto_its_nodes_during_the_window():
    c = cluster("lab-k8s")
    (window,) = c.rendering.reservations
    user = window["users"][0]
    # during the window the role has tainted the reserved nodes
    nodes = [
        {**n, "spec": {"taints": [*n["spec"]["taints"], window["taint"]]}}
        if n["metadata"]["name"] in window["nodes"]
        else n
        for n in c.nodes
    ]
    wclass = next(w for w in served(c.expanded) if set(window["nodes"]) & workers_of(c.expanded, w))
    plain = c.admission.admit(pod({CLASS: wclass}), username=user).pod
    assert not set(feasible(plain, nodes, c.capacity)) & set(window["nodes"])
    labels = {CLASS: wclass, RESERVATION: window["name"]}
    decision = c.admission.admit(pod(labels), username=user)
    assert decision.denied is None
    assert tolerates(decision.pod["spec"]["tolerations"], window["taint"])
    assert set(window["nodes"]) <= set(feasible(decision.pod, nodes, c.capacity))
    denied = c.admission.admit(pod(labels), username="mallory")
    assert denied.denied == f"reservation {window['name']} is not open to mallory"
    by_controller = c.admission.admit(
        pod(labels), username="system:serviceaccount:kube-system:job-controller"
    )
    assert by_controller.denied is None


def test_a_user_toleration_and_node_selector_are_kept():
    c = cluster("lab-k8s")
    mine = pod({CLASS: "general"})
    mine["spec"]["tolerations"] = [{"key": "example.com/x", "operator": "Exists"}]
    mine["spec"]["nodeSelector"] = {"kubernetes.io/os": "linux"}
    admitted = c.admission.admit(mine).pod
    assert admitted["spec"]["tolerations"][0] == {"key": "example.com/x", "operator": "Exists"}
    assert admitted["spec"]["nodeSelector"] == {
        "kubernetes.io/os": "linux",
        "cluster-plan.io/pool": "cpu",
    }


def test_an_explicit_priority_class_is_kept():
    c = cluster("lab-k8s")
    mine = pod({CLASS: "training"})
    mine["spec"]["priorityClassName"] = "system-cluster-critical"
    admitted = c.admission.admit(mine).pod
    assert admitted["spec"]["priorityClassName"] == "system-cluster-critical"
    assert "priority" not in admitted["spec"]


@pytest.mark.parametrize("plan", sorted(PLANS))
def test_policy_types_and_fields_exist_in_the_pinned_pod_schema(plan):
    c = cluster(plan)
    version = c.rendering.plan.release.minor
    problems = [p for e in c.admission.expressions() for p in object_type_problems(e, version)]
    assert problems == []


def test_the_type_check_finds_a_wrong_field():
    bad = "[JSONPatch{op: 'add', path: '/x', value: Object.spec.tolerations{keys: 'a'}}]"
    assert object_type_problems(bad, "1.36") == ["Object.spec.tolerations has no field keys"]
    bad = "Object.spec.affinity.nodeAfinity{}"
    assert object_type_problems(bad, "1.36") == [
        "Object.spec.affinity.nodeAfinity: no field nodeAfinity"
    ]


def test_json_patch_helper():
    doc = {"a": {"b/c": 1}, "l": [1]}
    out = apply_patch(
        doc,
        [
            {"op": "add", "path": "/a/b~1c", "value": 2},
            {"op": "add", "path": "/l/-", "value": 3},
            {"op": "add", "path": "/n", "value": {}},
        ],
    )
    assert out == {"a": {"b/c": 2}, "l": [1, 3], "n": {}}
    assert doc == {"a": {"b/c": 1}, "l": [1]}
    with pytest.raises(KeyError):
        apply_patch(doc, [{"op": "replace", "path": "/zz", "value": 1}])
