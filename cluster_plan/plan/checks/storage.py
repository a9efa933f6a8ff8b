"""Storage: Ceph monitors, failure domains, OSD disks, pools (dataset pools included), the
CephFS, disks allowed to be wiped, and the NFS server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from cluster_plan.plan.checks.base import Plan
from cluster_plan.plan.checks.hints import did_you_mean, missing
from cluster_plan.plan.findings import Finding
from cluster_plan.plan.nodes import Node


def check_ceph(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    ceph = (plan.get("storage") or {}).get("ceph")
    osds = [n for n in nodes if "ceph_osd" in n.roles]
    mons = [n for n in nodes if "ceph_mon" in n.roles]
    if not ceph and not osds and not mons:
        return
    # point at storage.ceph, or, in a plan without one, at the roles that make up Ceph
    where: tuple[Any, ...] = (
        ("storage", "ceph") if ceph else ("node_groups", (mons or osds)[0].group, "roles")
    )
    yield from _monitors(mons, osds, where)
    ceph = ceph or {}
    # A host whose profile is unknown is reported as such; here it gets the benefit of doubt.
    holders = [n for n in osds if _osd_disks(plan, n) or not _known_profile(plan, n)]
    yield from _pools(plan, ceph, holders)
    yield from _dataset_pools(plan, ceph, holders)
    yield from _cephfs(ceph, nodes)
    yield from _zap(plan, ceph, nodes)
    yield from _bench_pool(plan, ceph)
    yield from _profiles_without_osd_disk(plan, osds)


def _bench_pool(plan: Plan, ceph: dict[str, Any]) -> Iterator[Finding]:
    """The storage acceptance benchmark writes to a pool the plan has."""
    bench_pool = ((plan.get("acceptance") or {}).get("storage") or {}).get("pool")
    pools = [p["name"] for p in ceph.get("pools", [])]
    if bench_pool and bench_pool not in pools:
        yield missing("Ceph pool", bench_pool, pools, ("acceptance", "storage", "pool"))


def _profiles_without_osd_disk(plan: Plan, osds: list[Node]) -> Iterator[Finding]:
    # an unknown profile is reported as such; it has no disks to look at
    profiles = {n.hardware for n in osds if _known_profile(plan, n)}
    for profile in sorted(profiles):
        disks = plan["hardware"][profile].get("disks", [])
        if not any(d.get("use") == "osd" for d in disks):
            yield Finding(
                "ceph-no-osd-disk",
                f"hardware {profile} of OSD nodes has no disk with use: osd",
                ("hardware", profile, "disks"),
            )


def check_nfs_backends(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    """An export backed by the CephFS needs one (the server's role: check_nfs_service)."""
    storage = plan.get("storage") or {}
    nfs = storage.get("nfs")
    if not nfs or (storage.get("ceph") or {}).get("cephfs"):
        return
    for i, export in enumerate(nfs.get("exports") or []):
        if export.get("backend") == "cephfs":
            yield Finding(
                "nfs-cephfs-backend",
                f"export {export['path']} is backed by the CephFS, but the plan has none",
                ("storage", "nfs", "exports", i, "backend"),
                hint="add storage.ceph.cephfs, or use backend: vfs",
            )


def _known_profile(plan: Plan, node: Node) -> bool:
    return isinstance(node.hardware, str) and node.hardware in plan["hardware"]


def _disks(plan: Plan, node: Node) -> list[dict[str, Any]]:
    profile = plan["hardware"].get(node.hardware) if isinstance(node.hardware, str) else None
    return [*((profile or {}).get("disks") or []), *node.extra_disks]


def _osd_disks(plan: Plan, node: Node) -> list[str]:
    return [str(d.get("name")) for d in _disks(plan, node) if d.get("use") == "osd"]


def _monitors(mons: list[Node], osds: list[Node], where: tuple[Any, ...]) -> Iterator[Finding]:
    if not mons:
        yield Finding("ceph-monitors", "Ceph needs monitors; no node has the role ceph_mon", where)
    elif len(mons) % 2 == 0:
        yield Finding(
            "ceph-monitors",
            f"{len(mons)} Ceph monitors: use an odd number so a quorum survives a split",
            where,
        )
    elif len(mons) == 1 and osds:
        yield Finding(
            "ceph-monitors",
            "one Ceph monitor is a single point of failure",
            where,
            severity="warning",
        )


def _domain_key(plan: Plan, domain: str) -> Callable[[Node], Any]:
    row_of = {r: (spec or {}).get("row") or r for r, spec in (plan.get("racks") or {}).items()}
    return {
        "host": lambda n: n.name,
        "rack": lambda n: n.rack,
        "row": lambda n: row_of.get(n.rack or "", n.rack),
    }[domain]


def _dataset_racks(plan: Plan) -> dict[str, tuple[str, list[str]]]:
    """Pool -> (the first dataset naming it, the racks of every dataset naming it)."""
    pools: dict[str, tuple[str, list[str]]] = {}
    for name, dataset in ((plan.get("scheduler") or {}).get("datasets") or {}).items():
        pool = dataset.get("pool")
        if pool:
            _, racks = pools.setdefault(str(pool), (str(name), []))
            racks.extend(r for r in dataset.get("racks") or [] if r not in racks)
    return pools


def _pools(plan: Plan, ceph: dict[str, Any], holders: list[Node]) -> Iterator[Finding]:
    """Replicas of a pool land in distinct failure domains of OSD hosts that have a disk."""
    domain = ceph.get("failure_domain", "host")
    domains = {_domain_key(plan, domain)(n) for n in holders}
    dataset_pools = _dataset_racks(plan)
    for i, pool in enumerate(ceph.get("pools", [])):
        path = ("storage", "ceph", "pools", i)
        more = "" if domain == "host" else f" in more {domain}s"
        if pool["name"] not in dataset_pools and pool["size"] > len(domains):
            yield Finding(
                "ceph-failure-domains",
                f"pool {pool['name']} keeps {pool['size']} replicas in distinct {domain}s, but "
                f"the OSD hosts with an OSD disk span only {len(domains)}",
                (*path, "size"),
                hint=f"add OSD hosts{more}, or lower size",
            )
        if pool.get("min_size", 1) > pool["size"]:
            yield Finding("ceph-min-size", "min_size is larger than size", (*path, "min_size"))


def _dataset_pools(plan: Plan, ceph: dict[str, Any], holders: list[Node]) -> Iterator[Finding]:
    """A dataset's pool keeps its replicas in the dataset's racks: they must hold enough."""
    domain = ceph.get("failure_domain", "host")
    pools = {p["name"]: p for p in ceph.get("pools", [])}
    cephfs = ceph.get("cephfs")
    for pool_name, (dataset, racks) in sorted(_dataset_racks(plan).items()):
        path = ("scheduler", "datasets", dataset, "pool")
        if pool_name not in pools:
            yield missing("Ceph pool", pool_name, sorted(pools), path)
            continue
        pool = pools[pool_name]
        # Inside a single rack, replicas can only be spread over its hosts.
        inner = "host" if domain != "host" and len(racks) == 1 else domain
        inside = {_domain_key(plan, inner)(n) for n in holders if n.rack in racks}
        where = f"rack{'s' if len(racks) > 1 else ''} {', '.join(racks)}"
        if pool["size"] > len(inside):
            yield Finding(
                "ceph-dataset-pool",
                f"pool {pool_name} of dataset {dataset} keeps {pool['size']} replicas in distinct "
                f"{inner}s of {where}, but {'they hold' if len(racks) > 1 else 'it holds'} only "
                f"{len(inside)} OSD {inner}{'' if len(inside) == 1 else 's'}",
                path,
                hint=f"add OSD hosts to {where}, or lower the size of pool {pool_name}",
            )
        if cephfs and pool.get("application", "rbd") != "cephfs":
            yield Finding(
                "ceph-dataset-pool",
                f"pool {pool_name} of dataset {dataset} holds its CephFS subvolume, so its "
                f"application must be cephfs (it is {pool.get('application', 'rbd')})",
                ("storage", "ceph", "pools", list(pools).index(pool_name)),
                hint="set application: cephfs on the pool",
            )


def _cephfs(ceph: dict[str, Any], nodes: list[Node]) -> Iterator[Finding]:
    fs = ceph.get("cephfs")
    if not fs:
        return
    pools = [p["name"] for p in ceph.get("pools", [])]
    for key in ("metadata_pool", "data_pool"):
        if key in fs and fs[key] not in pools:
            yield missing("Ceph pool", fs[key], pools, ("storage", "ceph", "cephfs", key))
    if not any("ceph_mds" in n.roles for n in nodes):
        yield Finding(
            "ceph-no-mds",
            "the CephFS needs MDS daemons; no node has the role ceph_mds",
            ("storage", "ceph", "cephfs"),
            hint="add ceph_mds to the roles of one or (for a standby) two node groups",
        )


def _zap(plan: Plan, ceph: dict[str, Any], nodes: list[Node]) -> Iterator[Finding]:
    by_name = {n.name: n for n in nodes}
    for i, entry in enumerate(ceph.get("zap") or []):
        node = by_name.get(entry["host"])
        if node is None:
            yield missing(
                "host", entry["host"], sorted(by_name)[:50], ("storage", "ceph", "zap", i, "host")
            )
            continue
        disks = _osd_disks(plan, node)
        if entry["disk"] not in disks or "ceph_osd" not in node.roles:
            yield Finding(
                "unknown-reference",
                f"host {node.name} has no OSD disk {entry['disk']!r}",
                ("storage", "ceph", "zap", i, "disk"),
                hint=did_you_mean(entry["disk"], disks),
            )
