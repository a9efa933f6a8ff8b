"""Ansible filters for the NFS role: the exports of cluster_plan.storage.nfs (pure functions
over the expanded plan, unit-tested there). This only adapts."""

from __future__ import annotations

from typing import Any

from cluster_plan.storage import nfs


class FilterModule:
    """Ansible filters; see each function's docstring in cluster_plan.storage.nfs."""

    def filters(self) -> dict[str, Any]:
        return {
            "nfs_exports": nfs.nfs_exports,
            "nfs_client_mounts": nfs.nfs_client_mounts,
        }
