"""The label, taint and resource names the plan's policy is written in.

Pods declare what they are with labels under `cluster-plan.io/`; nodes carry what the plan
says about them under `cluster-plan.io/`, `<kind>.cluster-plan.io/<name>` (one label per
class served or dataset held, so a node may carry several) and the well-known Kubernetes
topology and NVIDIA labels.
"""

from __future__ import annotations

import re

from cluster_plan.plan.kubernetes import is_label_name as is_label_name
from cluster_plan.plan.kubernetes import object_name as object_name

DOMAIN = "cluster-plan.io"
MANAGED_BY = {"app.kubernetes.io/managed-by": "cluster-plan"}

# Declared by pods.
CLASS_LABEL = f"{DOMAIN}/workload-class"
DATASET_LABEL = f"{DOMAIN}/dataset"
RESERVATION_LABEL = f"{DOMAIN}/reservation"

# Carried by nodes.
POOL_LABEL = f"{DOMAIN}/pool"  # also the taint key of accelerator pools
ACCELERATOR_LABEL = f"{DOMAIN}/accelerator"
ACCELERATOR_COUNT_LABEL = f"{DOMAIN}/accelerator.count"
ZONE_LABEL = "topology.kubernetes.io/zone"  # the rack
ACCESS_SWITCH_LABEL = f"topology.{DOMAIN}/access-switch"
AGGREGATION_SWITCH_LABEL = f"topology.{DOMAIN}/aggregation-switch"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"  # the hardware profile
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
CONTROL_PLANE_ROLE = "node-role.kubernetes.io/control-plane"

NVIDIA_GPU = "nvidia.com/gpu"
NVIDIA_RUNTIME = "nvidia"

# Namespaces the routing policy leaves alone: the cluster's own components.
SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def class_label(workload_class: str) -> str:
    return f"workload-class.{DOMAIN}/{workload_class}"


def dataset_label(dataset: str) -> str:
    return f"dataset.{DOMAIN}/{dataset}"


def reservation_taint(reservation: str) -> str:
    return f"reservation.{DOMAIN}/{reservation}"


def extended_resource(gres_type: str) -> str:
    """The resource a generic accelerator is counted in: `cluster-plan.io/tpu`."""
    return f"{DOMAIN}/{gres_type}"


def is_object_name(text: str) -> bool:
    return bool(_DNS_LABEL.match(text))


def json_pointer(*parts: str) -> str:
    """An RFC 6901 pointer: `/` in a key (every label key has one) becomes `~1`."""
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)
