"""Shared file systems on the clients: one file system per mount point, and a CephFS that the
hosts it names as clients really mount. (Two NFS exports at one place: check_nfs_service.)"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cluster_plan.plan.checks.base import Plan
from cluster_plan.plan.defaults import PLAN_DEFAULTS
from cluster_plan.plan.findings import Finding
from cluster_plan.plan.nodes import Node

DEFAULT_CLIENTS = PLAN_DEFAULTS["storage.ceph.cephfs.clients"]


def check_mounts(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    storage = plan.get("storage") or {}
    cephfs = (storage.get("ceph") or {}).get("cephfs")
    if not isinstance(cephfs, dict):
        return
    yield from _cephfs_over_nfs(cephfs, storage.get("nfs") or {})
    yield from _client_roles(cephfs, nodes)


def _cephfs_over_nfs(cephfs: dict[str, Any], nfs: dict[str, Any]) -> Iterator[Finding]:
    """The CephFS and an NFS export mounted at one path: the second mount hides the first, and
    their systemd mount units have one name."""
    mount = str(cephfs.get("mount") or "").rstrip("/")
    for i, export in enumerate(nfs.get("exports") or []):
        if isinstance(export, dict) and str(export.get("mount") or "").rstrip("/") == mount:
            yield Finding(
                "duplicate-mount",
                f"NFS export {export.get('path')} is mounted at {export['mount']}, where the "
                "CephFS is mounted (storage.ceph.cephfs.mount)",
                ("storage", "nfs", "exports", i, "mount"),
                hint="mount each file system at its own path",
            )


def _client_roles(cephfs: dict[str, Any], nodes: list[Node]) -> Iterator[Finding]:
    clients = cephfs.get("clients")
    if not isinstance(clients, list):
        return
    held = {role for node in nodes for role in node.roles}
    if not held.intersection(clients):
        yield Finding(
            "cephfs-client-role",
            f"no host has a CephFS client role ({', '.join(map(str, clients))}): no host "
            "mounts the CephFS",
            ("storage", "ceph", "cephfs", "clients"),
            severity="warning",
            hint="list the roles of the hosts that use it (e.g. slurm_compute, login)",
        )
        return
    if clients == DEFAULT_CLIENTS:
        return  # the default names every role that may use it; a plan need not have them all
    for i, role in enumerate(clients):
        if role not in held:
            yield Finding(
                "cephfs-client-role",
                f"CephFS client role {role} is held by no host: nothing mounts the CephFS for it",
                ("storage", "ceph", "cephfs", "clients", i),
                severity="warning",
                hint="remove it, or give the role to the hosts that should mount the CephFS",
            )
