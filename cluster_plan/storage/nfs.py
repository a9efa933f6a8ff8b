"""The plan's NFS exports as NFS-Ganesha serves them, and who mounts them.

Pure functions over the expanded plan, unit-tested offline (tests/roles/test_nfs_plan.py).
"""

from __future__ import annotations

import re
from typing import Any

Plan = dict[str, Any]
Host = dict[str, Any]


def nfs_volume_group(path: str) -> str:
    """The CephFS subvolume group behind an export of `path` (roles/ceph makes it)."""
    return "nfs" + re.sub(r"[^A-Za-z0-9]+", "_", path).rstrip("_")


def nfs_exports(plan: Plan) -> list[dict[str, Any]]:
    """Exports with id, pseudo path (what clients mount), backend, the directory Ganesha
    serves (a local path, or the subvolume group's path in the CephFS) and the client CIDR."""
    nfs = (plan.get("storage") or {}).get("nfs") or {}
    networks = plan.get("networks") or {}
    exports = []
    for i, export in enumerate(nfs.get("exports") or [], start=1):
        backend = export.get("backend", "vfs")
        exports.append(
            {
                "id": i,
                "pseudo": export["path"],
                "backend": backend,
                "path": f"/volumes/{nfs_volume_group(export['path'])}"
                if backend == "cephfs"
                else export["path"],
                "network": export["network"],
                "clients": networks[export["network"]]["cidr"],
                "mount": export.get("mount") or "",
            }
        )
    return exports


def nfs_client_mounts(plan: Plan, host: Host) -> list[dict[str, Any]]:
    """The exports this host mounts: those with a mount point, on networks the host is on;
    the server is reached at its address on the export's network."""
    nfs = (plan.get("storage") or {}).get("nfs") or {}
    server = nfs.get("server")
    if not server or host["hostname"] == server:
        return []
    return [
        export
        for export in nfs_exports(plan)
        if export["mount"] and export["network"] in host.get("interfaces", {})
    ]
