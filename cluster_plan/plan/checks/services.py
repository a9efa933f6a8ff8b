"""Hosts that serve the rest: the NFS server and the backup target carry the role that sets
them up, sit on the networks they serve, and have the disk they need."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cluster_plan.plan.checks.base import Plan, first_names
from cluster_plan.plan.findings import Finding
from cluster_plan.plan.nodes import Node


def _role_hint(node: Node, role: str) -> str:
    return f"add {role} to the roles of group {node.group}"


def _idle_servers(servers: list[Node], chosen: Node, role: str, key: str) -> Iterator[Finding]:
    """One host serves; the role on another group sets up a service nothing uses. (Roles are
    per group: the chosen host's group mates carry the role as well, and that is fine.)"""
    idle = [n for n in servers if n.group != chosen.group]
    if idle:
        shown = first_names([n.name for n in idle])
        yield Finding(
            "nothing-to-serve",
            f"{shown} {'has' if len(idle) == 1 else 'have'} the role {role}, but {key} is "
            f"{chosen.name}: nothing uses {'it' if len(idle) == 1 else 'them'}",
            ("node_groups", idle[0].group, "roles"),
            severity="warning",
            hint=f"drop {role} from group {idle[0].group}, or point {key} at it",
        )


def _exports_off_the_server(
    plan: Plan, server: Node, exports: list[dict[str, Any]]
) -> Iterator[Finding]:
    """An export for a network the NFS server is not on."""
    for i, export in enumerate(exports):
        if export["network"] in plan["networks"] and export["network"] not in server.networks:
            yield Finding(
                "server-not-on-network",
                f"export {export['path']} is for network {export['network']}, which the NFS "
                f"server {server.name} is not on",
                ("storage", "nfs", "exports", i, "network"),
                hint=f"put group {server.group} on network {export['network']}",
            )


def check_nfs_service(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    nfs = (plan.get("storage") or {}).get("nfs")
    servers = [n for n in nodes if "nfs_server" in n.roles]
    if not nfs:
        if servers:
            yield Finding(
                "nothing-to-serve",
                f"{servers[0].name} has the role nfs_server, but storage.nfs exports nothing",
                ("node_groups", servers[0].group, "roles"),
                severity="warning",
                hint="add storage.nfs (server and exports), or drop the role",
            )
        return
    by_name = {n.name: n for n in nodes}
    server = by_name.get(nfs.get("server", ""))
    if server is None:
        return  # an unknown host is reported as such
    yield from _idle_servers(servers, server, "nfs_server", "storage.nfs.server")
    path = ("storage", "nfs", "server")
    if "nfs_server" not in server.roles:
        yield Finding(
            "nfs-server-role",
            f"NFS server {server.name} lacks the role nfs_server: nothing would export "
            + ("the exports" if nfs.get("exports") else "anything"),
            path,
            hint=_role_hint(server, "nfs_server"),
        )
    yield from _exports_off_the_server(plan, server, nfs.get("exports") or [])
    yield from _mounts(nfs.get("exports") or [])
    if not nfs.get("exports"):
        yield Finding(
            "nothing-to-serve",
            f"storage.nfs names server {server.name} but no exports",
            ("storage", "nfs"),
            severity="warning",
            hint="list exports (path, network), or remove storage.nfs",
        )


def _mounts(exports: list[dict[str, Any]]) -> Iterator[Finding]:
    """Two exports of one path, or two mounted at one place (the second hides the first)."""
    for key, what in (("path", "exported"), ("mount", "mounted")):
        first: dict[str, int] = {}
        for i, export in enumerate(exports):
            value = export.get(key)
            if value is None:
                continue
            if value.rstrip("/") in first:
                yield Finding(
                    "duplicate-export",
                    f"{value} is {what} twice (also exports[{first[value.rstrip('/')]}])",
                    ("storage", "nfs", "exports", i, key),
                    hint="one export per path, each mounted at its own place",
                )
            first.setdefault(value.rstrip("/"), i)


def check_backups(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    backups = plan.get("backups")
    if not backups:
        return
    by_name = {n.name: n for n in nodes}
    target = by_name.get(backups["target"]["host"])
    if target is None:
        return  # an unknown host is reported as such
    servers = [n for n in nodes if "backup_server" in n.roles]
    yield from _idle_servers(servers, target, "backup_server", "backups.target.host")
    path = ("backups", "target", "host")
    if "backup_server" not in target.roles:
        yield Finding(
            "missing-role",
            f"backup target {target.name} lacks the role backup_server: nothing would receive "
            "the backups",
            path,
            hint=_role_hint(target, "backup_server"),
        )
    profile: Any = plan["hardware"].get(target.hardware)
    if not isinstance(profile, dict):
        return  # an unknown profile is reported as such
    disks = [*(profile.get("disks") or []), *target.extra_disks]
    if not any(isinstance(d, dict) and d.get("use") == "backup" for d in disks):
        yield Finding(
            "no-backup-disk",
            f"backup target {target.name} ({target.hardware}) has no disk with use: backup; "
            "backups would share a disk with what they protect",
            path,
            severity="warning",
            hint=f"give hardware {target.hardware} (or node {target.name}) a disk with "
            "use: backup, or suppress with a reason",
        )
