"""NVIDIA GPUs in Kubernetes: the `nvidia` RuntimeClass (the containerd runtime entry the
`containerd` role writes on GPU nodes) and NVIDIA's device plugin, pinned by version, on
the GPU nodes only, with time-slicing or MIG as the plan says.

Generic accelerators have no device plugin here: they are counted as an extended resource
(nodes.extended_resources), which schedules them but does not hand a container its device.
"""

from __future__ import annotations

from typing import Any

import yaml

from cluster_plan.kubernetes import names
from cluster_plan.kubernetes.cluster import KubernetesPlan
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


def device_objects(plan: KubernetesPlan) -> list[dict[str, Any]]:
    if not has_gpus(plan):
        return []
    return [runtime_class(), *device_plugin(plan)]
