"""Ansible filters over cluster_plan.kubernetes: the plan's Kubernetes rendering, rebuilt from
what the inventory plugin gives every host (`cluster_plan`, each host's `plan_host`), the node
runtime's settings, what a node installs from the plan's mirror, the Calico manifest with the
plan's settings in, and the host-routes pod network. The decisions are the core's; this only
adapts."""

from __future__ import annotations

from typing import Any

from cluster_plan.kubernetes.role_view import (
    kubernetes_calico_manifest,
    kubernetes_host_routes,
    kubernetes_mirror_files,
    kubernetes_mirror_images,
    kubernetes_rendering,
    kubernetes_runtime,
)


class FilterModule:
    """Ansible filters; see each function's docstring."""

    def filters(self) -> dict[str, Any]:
        return {
            "kubernetes_rendering": kubernetes_rendering,
            "kubernetes_runtime": kubernetes_runtime,
            "kubernetes_mirror_files": kubernetes_mirror_files,
            "kubernetes_mirror_images": kubernetes_mirror_images,
            "kubernetes_host_routes": kubernetes_host_routes,
            "kubernetes_calico_manifest": kubernetes_calico_manifest,
        }
