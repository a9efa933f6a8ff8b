"""What the kubernetes, containerd and k8s_mirror roles write, as plain data: the plan's
Kubernetes rendering rebuilt from what the inventory gives every host (`cluster_plan`, each
host's `plan_host`), the node runtime's settings, the Calico manifest with the plan's settings
in, and the host-routes pod network from the cluster's nodes (filters of
plugins/filter/kubernetes_plan.py)."""

from __future__ import annotations

from typing import Any

import yaml

from cluster_plan.kubernetes import dump_documents, files, render
from cluster_plan.kubernetes.cluster import KubernetesPlan, kubernetes_plan
from cluster_plan.kubernetes.cni import (
    HOST_ROUTES_PROTOCOL,
    CalicoManifestError,
    customize_calico,
    host_routes,
    host_routes_conflist,
)
from cluster_plan.kubernetes.kubeadm import CONFIG_DIR, DISCOVERY_FILE, KUBELET_PATCH_FILE
from cluster_plan.kubernetes.mirror import (
    CNI_PLUGINS,
    CONTAINERD_BINARIES,
    KUBERNETES_BINARIES,
    plan_mirror,
    registry_hosts,
    registry_repositories,
    sandbox_image,
)
from cluster_plan.plan.findings import PlanError

NODE_OBJECTS = "objects/40-nodes.yaml"


def kubernetes_rendering(
    cluster: dict[str, Any], plan_hosts: dict[str, Any], groups: dict[str, Any]
) -> dict[str, Any]:
    """Everything the role writes, as plain data; `problems` says why there is nothing.
    `groups` are the inventory's (the monitoring objects read the plan's role groups)."""
    expanded = {
        **cluster,
        "hosts": dict(plan_hosts),
        "groups": {k: list(v) for k, v in groups.items() if k not in ("all", "ungrouped")},
    }
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
        **_installation(plan),
        "version": plan.release.version,
        "minor": plan.release.minor,
        "pause_image": plan.release.pause_image,
        "first_control_plane": plan.first_control_plane,
        "control_planes": list(plan.control_planes),
        "endpoint": plan.endpoint,
        "files": texts,
        # the Nodes' labels, taints and capacity are set once the nodes joined (nodes.yml)
        "object_files": sorted(
            rel for rel in texts if rel.startswith("objects/") and rel != NODE_OBJECTS
        ),
        "network": rendering.network,
        "reservations": rendering.reservations,
        "config_dir": CONFIG_DIR,
        "discovery_file": DISCOVERY_FILE,
        "kubelet_patch_file": KUBELET_PATCH_FILE,
        "nodes": nodes,
    }


def _installation(plan: KubernetesPlan) -> dict[str, Any]:
    """Where the nodes install from and what the lab changes: shared by the three roles."""
    mirror = plan_mirror(plan)
    return {
        "cni": plan.cni,
        "mirror": mirror.as_dict() if mirror else None,
        "lab": plan.lab,
    }


def kubernetes_runtime(cluster: dict[str, Any], plan_hosts: dict[str, Any]) -> dict[str, Any]:
    """What containerd needs, without rendering the whole plan: the sandbox image, the
    mirror (where the binaries and every image come from; None: the OS packages), the
    registries' hosts.toml, and the lab's settings."""
    try:
        plan = kubernetes_plan({**cluster, "hosts": dict(plan_hosts)})
    except PlanError as exc:
        return {"problems": exc.render()}
    mirror = plan_mirror(plan)
    from cluster_plan.lab.kubernetes import CONTAINERD as LAB_CONTAINERD

    return {
        "problems": "",
        **_installation(plan),
        "sandbox_image": sandbox_image(plan),
        "registry_hosts": registry_hosts(mirror) if mirror else {},
        "restrict_oom_score_adj": bool(plan.lab and LAB_CONTAINERD["restrict_oom_score_adj"]),
    }


def kubernetes_mirror_files(manifest: dict[str, Any], *parts: str) -> list[dict[str, Any]]:
    """The bundle's files a node installs from the mirror (`parts`: containerd, kubernetes,
    cni; none: all), with where they go and their sha256 from the bundle's manifest
    (`cluster-plan k8s bundle --format json`'s result)."""
    places = {
        "containerd": CONTAINERD_BINARIES,
        "kubernetes": KUBERNETES_BINARIES,
        "cni": {p: f"/opt/cni/bin/{p}" for p in CNI_PLUGINS},
    }
    binaries = {a["name"]: a for a in manifest["artifacts"] if a["kind"] == "binary"}
    return [
        {
            "name": name,
            "path": binaries[name]["path"],
            "sha256": binaries[name]["sha256"],
            "dest": dest,
        }
        for part in parts or tuple(places)
        for name, dest in places[part].items()
    ]


def kubernetes_mirror_images(manifest: dict[str, Any], layouts: str = "") -> list[dict[str, Any]]:
    """Every image of the bundle: its layout (under `layouts` on the mirror host), its
    manifest digest, and the registry repositories and tags it is served as."""
    return [
        {
            "name": a["name"],
            "path": a["path"],
            "layout": f"{layouts}/{a['name']}",
            "digest": f"sha256:{a['sha256']}",
            "places": registry_repositories(a),
        }
        for a in manifest["artifacts"]
        if a["kind"] == "image"
    ]


def kubernetes_host_routes(nodes: dict[str, Any], me: str, mtu: int) -> dict[str, Any]:
    """The host-routes pod network of node `me` from `kubectl get nodes -o json`: its CNI
    configuration (None until it has a pod range), its routes to the other nodes' ranges,
    and the nodes still without a range or an address."""
    routes = host_routes(nodes, me)
    cidr = routes["pod_cidr"]
    return {
        **routes,
        "protocol": HOST_ROUTES_PROTOCOL,
        "conflist": host_routes_conflist(cidr, mtu) if cidr else None,
    }


def kubernetes_calico_manifest(text: str, settings: dict[str, Any]) -> str:
    """Calico's release manifest (YAML text) with the plan's MTU, pool and encapsulation."""
    try:
        documents = [d for d in yaml.safe_load_all(text) if d]
        return dump_documents(customize_calico(documents, settings))
    except (yaml.YAMLError, CalicoManifestError) as exc:
        raise ValueError(f"cannot put the plan's settings into the Calico manifest: {exc}") from exc
