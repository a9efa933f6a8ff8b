"""Software per host: which build of each environment of the plan's `software` section a host
gets (docs/software.md). Pure; the checks and the expansion share it, so what validate judges
is what the hosts are given.

A build names pools and workload classes; its hosts are those of the pools named and of the
pools of the classes named. A host gets the first build of an environment that names it (two
that do are a finding of check_software).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any, cast

from cluster_plan.plan.contract import HostSoftware
from cluster_plan.plan.nodes import Node

Build = dict[str, Any]


def environments(plan: dict[str, Any]) -> dict[str, Any]:
    """The plan's environments, {} when it has no software section (or a broken one)."""
    software = plan.get("software")
    envs = software.get("environments") if isinstance(software, dict) else None
    return envs if isinstance(envs, dict) else {}


def builds(plan: dict[str, Any]) -> Iterator[tuple[str, int, Build]]:
    """Every build of every environment: (environment, index of the build, build)."""
    for env, items in environments(plan).items():
        for i, build in enumerate(items if isinstance(items, list) else []):
            if isinstance(build, dict):
                yield env, i, build


def _classes(plan: dict[str, Any]) -> dict[str, Any]:
    scheduler = plan.get("scheduler")
    classes = scheduler.get("workload_classes") if isinstance(scheduler, dict) else None
    return classes if isinstance(classes, dict) else {}


def build_pools(plan: dict[str, Any], build: Build) -> set[str]:
    """The pools whose hosts get ``build``: those it names and its classes' pools."""
    pools = {p for p in build.get("pools") or [] if isinstance(p, str)}
    classes = _classes(plan)
    for name in build.get("classes") or []:
        spec = classes.get(name) if isinstance(name, str) else None
        if isinstance(spec, dict) and isinstance(spec.get("pool"), str):
            pools.add(spec["pool"])
    return pools


def build_hosts(plan: dict[str, Any], build: Build, nodes: list[Node]) -> list[Node]:
    """The hosts that ``build`` names, in node order."""
    pools = build_pools(plan, build)
    return [node for node in nodes if node.pool in pools]


def host_builds(plan: dict[str, Any], nodes: list[Node]) -> dict[str, dict[str, list[int]]]:
    """host -> environment -> the indexes of the builds that name the host, in plan order
    (the first is the one the host gets; more than one is a conflict)."""
    out: dict[str, dict[str, list[int]]] = {node.name: {} for node in nodes}
    for env, i, build in builds(plan):
        for node in build_hosts(plan, build, nodes):
            out[node.name].setdefault(env, []).append(i)
    return out


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def host_mounts(plan: dict[str, Any], node: Node) -> list[str]:
    """The shared file systems ``node`` mounts: the CephFS where it holds a client role, and
    the NFS exports with a mount point on its networks (the server does not mount its own)."""
    storage = _mapping(plan.get("storage"))
    mounts: list[str] = []
    cephfs = _mapping(storage.get("ceph")).get("cephfs")
    if isinstance(cephfs, dict) and set(node.roles) & set(cephfs.get("clients") or []):
        mounts.append(str(cephfs.get("mount")))
    nfs = _mapping(storage.get("nfs"))
    if nfs.get("server") == node.name:
        return mounts
    for export in nfs.get("exports") or []:
        if (
            isinstance(export, dict)
            and export.get("mount")
            and export.get("network") in node.networks
        ):
            mounts.append(str(export["mount"]))
    return mounts


def on_mount(path: str, mounts: list[str]) -> bool:
    """Whether ``path`` lies on one of ``mounts`` (the mount point or below it)."""
    return any(path == m or path.startswith(m.rstrip("/") + "/") for m in mounts)


_HOST_KEYS = ("version", "source", "build", "packages", "prefix", "index_url", "module")


def host_software(plan: dict[str, Any], nodes: list[Node]) -> dict[str, dict[str, HostSoftware]]:
    """host -> environment -> the build it gets (the plan must be valid, defaults filled)."""
    envs = environments(plan)
    return {
        host: {
            env: cast(HostSoftware, {k: copy.deepcopy(envs[env][found[0]][k]) for k in _HOST_KEYS})
            for env, found in chosen.items()
        }
        for host, chosen in host_builds(plan, nodes).items()
    }
