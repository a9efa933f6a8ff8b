"""What the plan says about each node, as Kubernetes node labels, taints and capacity.

- every node: its rack as `topology.kubernetes.io/zone`, its access and aggregation switch,
  its hardware profile as `node.kubernetes.io/instance-type`;
- workers of a pool: `cluster-plan.io/pool`, one `workload-class.cluster-plan.io/<class>`
  per class the pool serves, one `dataset.cluster-plan.io/<name>` per dataset held;
- NVIDIA GPUs: the `nvidia.com/gpu.*` labels GPU feature discovery would set; generic
  accelerators: `cluster-plan.io/accelerator` (their capacity, `cluster-plan.io/<type>`,
  comes from the device plugin that serves them: devices.py);
- accelerator pools are tainted `cluster-plan.io/pool=<pool>:NoSchedule`, so only work the
  policy routed there (and so tolerates them) lands on them.
"""

from __future__ import annotations

from typing import Any

from cluster_plan.kubernetes import names
from cluster_plan.kubernetes.cluster import KubernetesPlan

Host = dict[str, Any]

# Labels a kubelet may set on its own Node (NodeRestriction admission): outside the
# kubernetes.io and k8s.io namespaces anything goes; inside them only these.
_SELF_LABEL_KEYS = frozenset(
    {
        "kubernetes.io/hostname",
        "kubernetes.io/arch",
        "kubernetes.io/os",
        "node.kubernetes.io/instance-type",
        "topology.kubernetes.io/region",
        "topology.kubernetes.io/zone",
    }
)
_SELF_LABEL_PREFIXES = ("kubelet.kubernetes.io/", "node.kubernetes.io/")


def accelerator_pools(plan: KubernetesPlan) -> frozenset[str]:
    """Pools with at least one accelerator node: all of their nodes are tainted."""
    return plan.accelerator_pools


def gpu_product(accelerators: dict[str, Any]) -> str:
    """The product name as NVIDIA's GPU feature discovery labels it: the NVML name with
    spaces as dashes (NVIDIA H100 PCIe -> NVIDIA-H100-PCIe)."""
    nvml = (accelerators.get("catalog") or {}).get("nvml_names") or [accelerators["model"]]
    return str(nvml[0]).replace(" ", "-")


def node_labels(plan: KubernetesPlan, name: str) -> dict[str, str]:
    host = plan.host(name)
    labels: dict[str, str] = {names.INSTANCE_TYPE_LABEL: str(host["hardware_profile"])}
    if host.get("rack"):
        labels[names.ZONE_LABEL] = str(host["rack"])
    if host.get("access_switch"):
        labels[names.ACCESS_SWITCH_LABEL] = str(host["access_switch"])
    if host.get("aggregation_switch"):
        labels[names.AGGREGATION_SWITCH_LABEL] = str(host["aggregation_switch"])
    if "k8s_control_plane" in host["roles"]:
        labels[names.CONTROL_PLANE_ROLE] = ""
    if host.get("pool") and "k8s_worker" in host["roles"]:
        labels[names.POOL_LABEL] = str(host["pool"])
        for wclass in plan.classes_of.get(name, ()):
            labels[names.class_label(wclass)] = "true"
    for dataset in host.get("datasets") or []:
        labels[names.dataset_label(str(dataset))] = "true"
    accel = host.get("accelerators")
    if accel and accel.get("kind") == "gpu":
        labels[names.GPU_PRESENT_LABEL] = "true"
        labels[names.GPU_PRODUCT_LABEL] = gpu_product(accel)
        labels[names.GPU_COUNT_LABEL] = str(accel["count"])
    elif accel:
        labels[names.ACCELERATOR_LABEL] = str(accel["gres_type"])
        labels[names.ACCELERATOR_COUNT_LABEL] = str(accel["count"])
    return dict(sorted(labels.items()))


def node_taints(plan: KubernetesPlan, name: str) -> list[dict[str, str]]:
    host = plan.host(name)
    taints = []
    if "k8s_control_plane" in host["roles"] and "k8s_worker" not in host["roles"]:
        taints.append({"key": names.CONTROL_PLANE_ROLE, "effect": "NoSchedule"})
    pool = host.get("pool")
    if pool and "k8s_worker" in host["roles"] and str(pool) in accelerator_pools(plan):
        taints.append({"key": names.POOL_LABEL, "value": str(pool), "effect": "NoSchedule"})
    return taints


def node_capacity(host: Host) -> dict[str, int]:
    """Every device resource a node offers once its plugins run (for the routing tests)."""
    accel = host.get("accelerators")
    if not accel or not accel.get("count"):
        return {}
    if accel.get("kind") == "gpu":
        return {names.NVIDIA_GPU: int(accel["count"])}
    return {names.extended_resource(str(accel["gres_type"])): int(accel["count"])}


def kubelet_labels(labels: dict[str, str]) -> dict[str, str]:
    """The labels a kubelet may register itself with (`--node-labels`); the rest (the
    control-plane role) are set by kubeadm or the role with admin rights."""

    def allowed(key: str) -> bool:
        prefix = key.split("/", 1)[0] if "/" in key else ""
        restricted = prefix.endswith(("kubernetes.io", "k8s.io"))
        return not restricted or key in _SELF_LABEL_KEYS or key.startswith(_SELF_LABEL_PREFIXES)

    return {k: v for k, v in labels.items() if allowed(k)}


def node_objects(plan: KubernetesPlan) -> list[dict[str, Any]]:
    """One Node per Kubernetes node with the plan's labels and taints: for review, and
    applied by the role (labels by server-side apply, taints with `kubectl taint`). Device
    capacity is the device plugins' to report, from the devices a node has."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": node_labels(plan, name)},
            "spec": {"taints": node_taints(plan, name)},
        }
        for name in plan.nodes
    ]
