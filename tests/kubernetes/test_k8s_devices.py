"""Accelerators in the rendered objects (cluster_plan.kubernetes.devices): which device plugin
serves which node's devices, read back from the DaemonSets, their ConfigMap and the Node
labels, and compared with the accelerators the expanded plan gives each host (not with the
renderer's own tables); `gpu_sharing` in the plugin's configuration; what the plan's bundle
then holds."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from k8s_plans import expanded_plan, lab_plan_as_kubernetes

from cluster_plan.kubernetes import render
from cluster_plan.kubernetes.bundle.artifacts import bundle_spec
from cluster_plan.kubernetes.cluster import kubernetes_plan
from cluster_plan.kubernetes.devices import bundle_needs
from cluster_plan.kubernetes.mirror import plan_mirror

Document = dict[str, Any]
NVIDIA_PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin"


def by_kind(objects: list[Document], kind: str) -> list[Document]:
    return [o for o in objects if o["kind"] == kind]


def wanted(expanded: dict[str, Any]) -> dict[str, str]:
    """Node -> the resource its accelerators are, as the plan declares them."""
    out = {}
    for name, host in expanded["hosts"].items():
        accel = host.get("accelerators") or {}
        if accel.get("count") and "k8s_worker" in host.get("roles", []):
            gpu = accel["kind"] == "gpu"
            out[name] = "nvidia.com/gpu" if gpu else f"cluster-plan.io/{accel['gres_type']}"
    return out


def node_labels(objects: list[Document]) -> dict[str, dict[str, str]]:
    return {n["metadata"]["name"]: n["metadata"]["labels"] for n in by_kind(objects, "Node")}


def selects(pod: Document, labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in pod["nodeSelector"].items())


def project_plugin(objects: list[Document]) -> tuple[dict[str, Any], list[Document]]:
    """The project plugin's configurations (file name -> parsed) and its DaemonSets."""
    configs = [
        c
        for c in by_kind(objects, "ConfigMap")
        if c["metadata"]["name"] == "cluster-plan-device-plugin"
    ]
    data = {name: json.loads(text) for c in configs for name, text in c["data"].items()}
    daemon_sets = [
        d
        for d in by_kind(objects, "DaemonSet")
        if d["metadata"]["name"].startswith("cluster-plan-device-plugin-")
    ]
    return data, daemon_sets


def served_per_node(objects: list[Document]) -> dict[str, list[dict[str, Any]]]:
    """Node -> the resources the project's plugin serves there (config entries)."""
    data, daemon_sets = project_plugin(objects)
    labels = node_labels(objects)
    out: dict[str, list[dict[str, Any]]] = {}
    for daemon_set in daemon_sets:
        pod = daemon_set["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        config_arg = next(a for a in container["args"] if a.startswith("--config="))
        mount = next(m for m in container["volumeMounts"] if m["name"] == "config")
        directory, file = config_arg.removeprefix("--config=").rsplit("/", 1)
        assert directory == mount["mountPath"]
        volume = next(v for v in pod["volumes"] if v["name"] == "config")
        assert volume["configMap"]["name"] == "cluster-plan-device-plugin"
        for node, node_labels_ in labels.items():
            if selects(pod, node_labels_):
                out.setdefault(node, []).extend(data[file]["resources"])
    return out


def nvidia_plugin_nodes(objects: list[Document]) -> set[str]:
    labels = node_labels(objects)
    nodes = set()
    for daemon_set in by_kind(objects, "DaemonSet"):
        pod = daemon_set["spec"]["template"]["spec"]
        if any(c["image"].startswith(NVIDIA_PLUGIN_IMAGE) for c in pod["containers"]):
            nodes |= {n for n, node_labels_ in labels.items() if selects(pod, node_labels_)}
    return nodes


def test_in_the_lab_the_project_plugin_serves_every_accelerator_node():
    expanded = expanded_plan("lab-k8s")
    objects = render(expanded).all_objects()
    want = wanted(expanded)
    assert set(want.values()) == {"nvidia.com/gpu", "cluster-plan.io/tpu"}
    served = served_per_node(objects)
    assert {node: [r["name"] for r in resources] for node, resources in served.items()} == {
        node: [resource] for node, resource in want.items()
    }
    devices = {r["name"]: r["devices"] for resources in served.values() for r in resources}
    # the lab's stand-ins (cluster_plan/lab/hardware.py): one node per GPU, not nvidiactl
    assert devices == {
        "nvidia.com/gpu": "/dev/nvidia[0-9]*",
        "cluster-plan.io/tpu": "/dev/accel/accel*",
    }
    # NVIDIA's plugin would find no GPU behind the stand-ins
    assert nvidia_plugin_nodes(objects) == set()


def test_on_a_real_cluster_nvidia_serves_gpus_and_the_project_the_generic_classes():
    expanded = expanded_plan("k8s-inference")
    objects = render(expanded).all_objects()
    want = wanted(expanded)
    gpus = {n for n, r in want.items() if r == "nvidia.com/gpu"}
    generic = {n: r for n, r in want.items() if r != "nvidia.com/gpu"}
    assert gpus and generic
    assert nvidia_plugin_nodes(objects) == gpus
    served = served_per_node(objects)
    assert {n: [r["name"] for r in rs] for n, rs in served.items()} == {
        n: [r] for n, r in generic.items()
    }


def test_the_plugin_runs_the_bundles_image_with_the_hosts_dev_read_only():
    objects = render(expanded_plan("lab-k8s")).all_objects()
    _, daemon_sets = project_plugin(objects)
    image = bundle_spec("1.36", bundle_needs(kubernetes_plan(expanded_plan("lab-k8s"))))
    built = image.image("cluster-plan-device-plugin")
    assert built.reference.startswith("cluster-plan.local/cluster-plan-device-plugin:v0.1.0-")
    # the lab plan has a mirror: the nodes pull it from there by the registry's own name
    mirror = plan_mirror(kubernetes_plan(expanded_plan("lab-k8s")))
    assert mirror is not None
    reference = f"{mirror.registry}/{built.mirror_path}"
    for daemon_set in daemon_sets:
        pod = daemon_set["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        assert container["image"] == reference
        assert "--host-root=/host" in container["args"]
        mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
        assert mounts["/host/dev"]["readOnly"] is True
        assert "/var/lib/kubelet/device-plugins" in mounts
        # a node agent: on its nodes whatever their pool's or a reservation's taints
        assert pod["tolerations"] == [{"operator": "Exists"}]


def sharing(setting: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    def edit(plan: dict[str, Any]) -> None:
        plan["scheduler"]["kubernetes"]["gpu_sharing"] = setting

    return edit


@pytest.mark.parametrize(
    ("setting", "replicas"),
    [
        ({"mode": "time-slicing", "replicas": 4}, 4),
        ({"mode": "time-slicing", "replicas": 2}, 2),
        ({"mode": "none"}, None),
        ({"mode": "mig"}, None),  # the stand-ins have no MIG: served whole
    ],
)
def test_gpu_sharing_in_the_lab_is_the_plugins_replicas(setting, replicas):
    objects = render(lab_plan_as_kubernetes(sharing(setting))).all_objects()
    served = served_per_node(objects)
    gpu = [r for rs in served.values() for r in rs if r["name"] == "nvidia.com/gpu"]
    tpu = [r for rs in served.values() for r in rs if r["name"] != "nvidia.com/gpu"]
    assert gpu and tpu
    assert {r.get("replicas") for r in gpu} == {replicas}
    assert {r.get("replicas") for r in tpu} == {None}  # gpu_sharing is about GPUs only


def test_a_plan_without_accelerators_needs_no_plugin():
    expanded = expanded_plan("lab-k8s")
    for host in expanded["hosts"].values():
        host["accelerators"] = None
    plan = kubernetes_plan(expanded)
    assert bundle_needs(plan).device_plugin is False
    assert project_plugin(render(expanded).all_objects()) == ({}, [])
    assert bundle_spec("1.36", bundle_needs(plan)).recipe() == bundle_spec("1.36").recipe()
