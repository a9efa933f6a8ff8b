"""What the kubernetes role writes, as plain data: the plan's Kubernetes rendering rebuilt
from what the inventory gives every host (`cluster_plan`, each host's `plan_host`), and the
Calico manifest with the plan's settings in (filters of plugins/filter/kubernetes_plan.py)."""

from __future__ import annotations

from typing import Any

import yaml

from cluster_plan.kubernetes import dump_documents, files, render
from cluster_plan.kubernetes.cni import CalicoManifestError, customize_calico
from cluster_plan.kubernetes.kubeadm import CONFIG_DIR, DISCOVERY_FILE, KUBELET_PATCH_FILE
from cluster_plan.plan.findings import PlanError


def kubernetes_rendering(cluster: dict[str, Any], plan_hosts: dict[str, Any]) -> dict[str, Any]:
    """Everything the role writes, as plain data; `problems` says why there is nothing."""
    expanded = {**cluster, "hosts": dict(plan_hosts)}
    try:
        rendering = render(expanded)
    except PlanError as exc:
        return {"problems": exc.render(), "nodes": {}}
    plan = rendering.plan
    texts = files(rendering)
    node_objects = {o["metadata"]["name"]: o for o in rendering.objects.get("40-nodes", [])}
    nodes = {}
    for name in plan.nodes:
        node = node_objects[name]
        labels_only = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": node["metadata"]["labels"]},
        }
        nodes[name] = {
            "kubeadm": texts[f"kubeadm/{name}.yaml"],
            "kubelet_patch": texts[f"kubelet/{name}.yaml"],
            "static_pods": {
                rel.rsplit("/", 1)[-1]: text
                for rel, text in texts.items()
                if rel.startswith(f"static-pods/{name}/")
            },
            "labels_document": dump_documents([labels_only]),
            "taints": node["spec"]["taints"],
            "capacity": (node.get("status") or {}).get("capacity") or {},
        }
    return {
        "problems": "",
        "version": plan.release.version,
        "minor": plan.release.minor,
        "pause_image": plan.release.pause_image,
        "first_control_plane": plan.first_control_plane,
        "control_planes": list(plan.control_planes),
        "endpoint": plan.endpoint,
        "files": texts,
        "object_files": sorted(rel for rel in texts if rel.startswith("objects/")),
        "network": rendering.network,
        "reservations": rendering.reservations,
        "config_dir": CONFIG_DIR,
        "discovery_file": DISCOVERY_FILE,
        "kubelet_patch_file": KUBELET_PATCH_FILE,
        "nodes": nodes,
    }


def kubernetes_calico_manifest(text: str, settings: dict[str, Any]) -> str:
    """Calico's release manifest (YAML text) with the plan's MTU, pool and encapsulation."""
    try:
        documents = [d for d in yaml.safe_load_all(text) if d]
        return dump_documents(customize_calico(documents, settings))
    except (yaml.YAMLError, CalicoManifestError) as exc:
        raise ValueError(f"cannot put the plan's settings into the Calico manifest: {exc}") from exc
