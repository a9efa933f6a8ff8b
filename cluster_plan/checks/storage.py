"""Storage: Ceph monitors, failure domains and OSD disks."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from cluster_plan.checks.base import Plan
from cluster_plan.findings import Finding
from cluster_plan.nodes import Node


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
    yield from _pools(plan, ceph or {}, osds)
    profiles = {n.hardware for n in osds}
    # an unknown profile is reported as such; it has no disks to look at
    for profile in sorted(p for p in profiles if isinstance(p, str) and p in plan["hardware"]):
        disks = plan["hardware"][profile].get("disks", [])
        if not any(d.get("use") == "osd" for d in disks):
            yield Finding(
                "ceph-no-osd-disk",
                f"hardware {profile} of OSD nodes has no disk with use: osd",
                ("hardware", profile, "disks"),
            )


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


def _pools(plan: Plan, ceph: dict[str, Any], osds: list[Node]) -> Iterator[Finding]:
    domain = ceph.get("failure_domain", "host")
    row_of = {r: (spec or {}).get("row") or r for r, spec in (plan.get("racks") or {}).items()}
    key: Callable[[Node], Any] = {
        "host": lambda n: n.name,
        "rack": lambda n: n.rack,
        "row": lambda n: row_of.get(n.rack or "", n.rack),
    }[domain]
    domains = {key(n) for n in osds}
    for i, pool in enumerate(ceph.get("pools", [])):
        path = ("storage", "ceph", "pools", i)
        if pool["size"] > len(domains):
            yield Finding(
                "ceph-failure-domains",
                f"pool {pool['name']} keeps {pool['size']} replicas in distinct {domain}s, but "
                f"the OSD nodes span only {len(domains)}",
                (*path, "size"),
                hint=f"add OSD nodes in more {domain}s, or lower size",
            )
        if pool.get("min_size", 1) > pool["size"]:
            yield Finding("ceph-min-size", "min_size is larger than size", (*path, "min_size"))
