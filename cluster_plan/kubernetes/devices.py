"""Accelerators in Kubernetes.

- NVIDIA GPUs: the `nvidia` RuntimeClass (the containerd runtime entry the `containerd` role
  writes on GPU nodes) and NVIDIA's device plugin, pinned by version, on the GPU nodes only,
  with time-slicing or MIG as the plan says.
- Generic accelerator classes, which have no vendor plugin: the project's device plugin
  (cluster_plan/kubernetes/bundle/go/device-plugin, an image of the offline bundle), one
  DaemonSet per class on the nodes labelled with it, serving `cluster-plan.io/<type>` from
  the kernel's accelerator device nodes (/dev/accel/accel*).
- In the lab (a plan with a `lab` section), whose GPUs are stand-in device nodes no NVIDIA
  driver answers, the project's plugin serves `nvidia.com/gpu` from /dev/nvidia<N> instead
  of NVIDIA's, which would find no GPU.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import yaml

from cluster_plan.kubernetes import names
from cluster_plan.kubernetes.bundle.artifacts import device_plugin_image
from cluster_plan.kubernetes.bundle.project import BundleNeeds
from cluster_plan.kubernetes.cluster import KubernetesPlan
from cluster_plan.kubernetes.mirror import plan_mirror
from cluster_plan.kubernetes.nodes import accelerator_pools

DEVICE_PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"
DEVICE_PLUGIN_NAME = "nvidia-device-plugin"
DEVICE_PLUGIN_NAMESPACE = "kube-system"
_APP = {"app.kubernetes.io/name": DEVICE_PLUGIN_NAME}


def has_gpus(plan: KubernetesPlan) -> bool:
    return any((plan.host(n).get("accelerators") or {}).get("kind") == "gpu" for n in plan.nodes)


def runtime_class() -> dict[str, Any]:
    return {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": names.NVIDIA_RUNTIME, "labels": dict(names.MANAGED_BY)},
        "handler": names.NVIDIA_RUNTIME,
        "scheduling": {"nodeSelector": {names.GPU_PRESENT_LABEL: "true"}},
    }


def device_plugin_config(sharing: dict[str, Any]) -> dict[str, Any]:
    """The device plugin's configuration file (its `version: v1` format)."""
    mode = sharing["mode"]
    config: dict[str, Any] = {
        "version": "v1",
        "flags": {"migStrategy": sharing["mig_strategy"] if mode == "mig" else "none"},
    }
    if mode == "time-slicing":
        config["sharing"] = {
            "timeSlicing": {
                "resources": [{"name": names.NVIDIA_GPU, "replicas": int(sharing["replicas"])}]
            }
        }
    return config


def device_plugin(plan: KubernetesPlan) -> list[dict[str, Any]]:
    config = yaml.safe_dump(device_plugin_config(plan.gpu_sharing), sort_keys=False)
    tolerations = [
        {"key": names.NVIDIA_GPU, "operator": "Exists", "effect": "NoSchedule"},
        *(
            {"key": names.POOL_LABEL, "operator": "Equal", "value": pool, "effect": "NoSchedule"}
            for pool in sorted(accelerator_pools(plan))
        ),
    ]
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": DEVICE_PLUGIN_NAME,
                "namespace": DEVICE_PLUGIN_NAMESPACE,
                "labels": {**_APP, **names.MANAGED_BY},
            },
            "data": {"config.yaml": config},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {
                "name": DEVICE_PLUGIN_NAME,
                "namespace": DEVICE_PLUGIN_NAMESPACE,
                "labels": {**_APP, **names.MANAGED_BY},
            },
            "spec": {
                "selector": {"matchLabels": dict(_APP)},
                "updateStrategy": {"type": "RollingUpdate"},
                "template": {
                    "metadata": {"labels": dict(_APP)},
                    "spec": {
                        "nodeSelector": {names.GPU_PRESENT_LABEL: "true"},
                        "tolerations": tolerations,
                        "priorityClassName": "system-node-critical",
                        "runtimeClassName": names.NVIDIA_RUNTIME,
                        "containers": [
                            {
                                "name": DEVICE_PLUGIN_NAME,
                                "image": DEVICE_PLUGIN_IMAGE,
                                "args": [
                                    "--fail-on-init-error=true",
                                    "--config-file=/etc/nvidia-device-plugin/config.yaml",
                                ],
                                "securityContext": {
                                    "allowPrivilegeEscalation": False,
                                    "capabilities": {"drop": ["ALL"]},
                                },
                                "volumeMounts": [
                                    {
                                        "name": "device-plugins",
                                        "mountPath": "/var/lib/kubelet/device-plugins",
                                    },
                                    {
                                        "name": "config",
                                        "mountPath": "/etc/nvidia-device-plugin",
                                        "readOnly": True,
                                    },
                                ],
                            }
                        ],
                        "volumes": [
                            {
                                "name": "device-plugins",
                                "hostPath": {
                                    "path": "/var/lib/kubelet/device-plugins",
                                    "type": "Directory",
                                },
                            },
                            {"name": "config", "configMap": {"name": DEVICE_PLUGIN_NAME}},
                        ],
                    },
                },
            },
        },
    ]


PROJECT_PLUGIN = "cluster-plan-device-plugin"
PROJECT_PLUGIN_CONFIG = "/etc/cluster-plan-device-plugin"
PLUGIN_DIR = "/var/lib/kubelet/device-plugins"
HOST_ROOT = "/host"  # the host's /dev is mounted at /host/dev: the container keeps its own
# The kernel's compute accelerator class (drivers/accel) names its devices /dev/accel/accel<N>
GENERIC_DEVICES = "/dev/accel/accel*"
NVIDIA_DEVICES = "/dev/nvidia[0-9]*"  # not nvidiactl or nvidia-uvm: one node per GPU
# NVIDIA's container toolkit reads it to pick GPUs, NVIDIA's device plugin sets it
NVIDIA_ENV = "NVIDIA_VISIBLE_DEVICES"


@dataclass(frozen=True)
class ServedClass:
    """One resource the project's device plugin serves, on the nodes that have it."""

    key: str  # accel-<type> | nvidia-gpu: the DaemonSet's suffix and its configuration file
    resource: str
    devices: str  # the glob of its device nodes on a node
    env: str  # what tells a container the numbers of the devices it got
    node_selector: dict[str, str]
    replicas: int = 1  # time-slicing: each device offered this many times

    def config(self) -> dict[str, Any]:
        """The plugin's configuration file (go/device-plugin/config.go)."""
        resource: dict[str, Any] = {"name": self.resource, "devices": self.devices}
        resource["env"] = self.env
        if self.replicas > 1:
            resource["replicas"] = self.replicas
        return {"resources": [resource]}


def _env(gres_type: str) -> str:
    """TPU_VISIBLE_DEVICES for `tpu`: CUDA_VISIBLE_DEVICES' counterpart for a generic class."""
    name = re.sub(r"[^A-Z0-9]", "_", gres_type.upper())
    return f"{'ACCEL_' if name[:1].isdigit() else ''}{name}_VISIBLE_DEVICES"


def served_classes(plan: KubernetesPlan) -> list[ServedClass]:
    """What the project's plugin serves: every generic class, and in the lab NVIDIA GPUs,
    time-sliced as `gpu_sharing` says (the stand-ins have no MIG: they are served whole)."""
    lab = plan.expanded.get("lab") is not None
    sharing = plan.gpu_sharing
    replicas = int(sharing["replicas"]) if sharing.get("mode") == "time-slicing" else 1
    served: dict[str, ServedClass] = {}
    for node in plan.nodes:
        accel = plan.host(node).get("accelerators") or {}
        if not accel.get("count"):
            continue
        if accel.get("kind") == "gpu":
            if lab:
                selector = {names.GPU_PRESENT_LABEL: "true"}
                served["nvidia-gpu"] = ServedClass(
                    "nvidia-gpu", names.NVIDIA_GPU, NVIDIA_DEVICES, NVIDIA_ENV, selector, replicas
                )
            continue
        gres_type = str(accel["gres_type"])
        key = f"accel-{names.object_name(gres_type)}"
        served[key] = ServedClass(
            key,
            names.extended_resource(gres_type),
            GENERIC_DEVICES,
            _env(gres_type),
            {names.ACCELERATOR_LABEL: gres_type},
        )
    return [served[key] for key in sorted(served)]


def _project_plugin_pod(image: str, served: ServedClass) -> dict[str, Any]:
    return {
        "nodeSelector": dict(served.node_selector),
        # a node agent: on its nodes whatever their taints (pools, reservations, draining)
        "tolerations": [{"operator": "Exists"}],
        "priorityClassName": "system-node-critical",
        "containers": [
            {
                "name": "device-plugin",
                "image": image,
                "args": [
                    f"--config={PROJECT_PLUGIN_CONFIG}/{served.key}.json",
                    f"--host-root={HOST_ROOT}",
                ],
                "resources": {
                    "requests": {"cpu": "10m", "memory": "32Mi"},
                    "limits": {"memory": "64Mi"},
                },
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "readOnlyRootFilesystem": True,
                    "capabilities": {"drop": ["ALL"]},
                },
                "volumeMounts": [
                    {"name": "device-plugins", "mountPath": PLUGIN_DIR},
                    {"name": "dev", "mountPath": f"{HOST_ROOT}/dev", "readOnly": True},
                    {"name": "config", "mountPath": PROJECT_PLUGIN_CONFIG, "readOnly": True},
                ],
            }
        ],
        "volumes": [
            {"name": "device-plugins", "hostPath": {"path": PLUGIN_DIR, "type": "Directory"}},
            {"name": "dev", "hostPath": {"path": "/dev", "type": "Directory"}},
            {"name": "config", "configMap": {"name": PROJECT_PLUGIN}},
        ],
    }


def project_device_plugin(plan: KubernetesPlan) -> list[dict[str, Any]]:
    """The project's plugin: a ConfigMap with one configuration per served class, and a
    DaemonSet per class running the bundle's image on the nodes of that class."""
    served = served_classes(plan)
    if not served:
        return []
    # from the plan's mirror, under the registry's own name as kubeadm's images are (nodes
    # never resolve the project's name); without one, the bundle's name, which a site imports
    # the bundle's images under
    built = device_plugin_image()
    mirror = plan_mirror(plan)
    image = built.mirror_reference(mirror.registry) if mirror else built.reference
    metadata = {"namespace": DEVICE_PLUGIN_NAMESPACE, "labels": {**names.MANAGED_BY}}
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": PROJECT_PLUGIN, **metadata},
        "data": {f"{c.key}.json": json.dumps(c.config(), indent=2) + "\n" for c in served},
    }
    daemon_sets = []
    for one in served:
        app = {"app.kubernetes.io/name": f"{PROJECT_PLUGIN}-{one.key}"}
        daemon_sets.append(
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {
                    "name": f"{PROJECT_PLUGIN}-{one.key}",
                    "namespace": DEVICE_PLUGIN_NAMESPACE,
                    "labels": {**app, **names.MANAGED_BY},
                },
                "spec": {
                    "selector": {"matchLabels": dict(app)},
                    "updateStrategy": {"type": "RollingUpdate"},
                    "template": {
                        "metadata": {"labels": dict(app)},
                        "spec": _project_plugin_pod(image, one),
                    },
                },
            }
        )
    return [config, *daemon_sets]


def bundle_needs(plan: KubernetesPlan) -> BundleNeeds:
    """What the plan's offline bundle holds besides the Kubernetes release: the project's
    device plugin where it serves a class."""
    return BundleNeeds(device_plugin=bool(served_classes(plan)))


def device_objects(plan: KubernetesPlan) -> list[dict[str, Any]]:
    lab = plan.expanded.get("lab") is not None
    nvidia = [runtime_class()] if has_gpus(plan) else []
    if nvidia and not lab:
        nvidia += device_plugin(plan)
    return [*nvidia, *project_device_plugin(plan)]
