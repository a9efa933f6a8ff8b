"""Backup copies that protect something: an offsite copy away from the first one, and sources
that do not take in a repository (the target backing itself up into itself). The target's
role and disk: check_backups."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cluster_plan.plan.checks.base import Plan
from cluster_plan.plan.findings import Finding
from cluster_plan.plan.nodes import Node


def check_backup_copies(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    backups = plan.get("backups")
    if not isinstance(backups, dict):
        return
    target, offsite = backups.get("target") or {}, backups.get("offsite") or {}
    wanted = {target.get("host"), offsite.get("host")}
    by_name: dict[Any, Node] = {n.name: n for n in nodes if n.name in wanted}
    yield from _offsite(by_name.get(target.get("host")), by_name.get(offsite.get("host")))
    repositories = [("target", target), ("offsite", offsite)]
    for i, source in enumerate(backups.get("sources") or []):
        for key, repository in repositories:
            if _within(repository.get("path"), source):
                yield Finding(
                    "backup-source-repository",
                    f"source {source} holds the {key} repository {repository['path']}: "
                    f"{repository['host']} would back its backups up into themselves, "
                    "growing with every run",
                    ("backups", "sources", i),
                    hint=f"back up directories beside {repository['path']}, not above it",
                )


def _within(path: Any, source: Any) -> bool:
    if not isinstance(path, str) or not isinstance(source, str) or not source.startswith("/"):
        return False
    base = source.rstrip("/")
    return path.rstrip("/") == base or path.startswith(base + "/")


def _offsite(target: Node | None, offsite: Node | None) -> Iterator[Finding]:
    if target is None or offsite is None:
        return  # no offsite copy, or an unknown host (reported as such)
    path = ("backups", "offsite", "host")
    if offsite.name == target.name:
        yield Finding(
            "backup-offsite",
            f"the offsite copy is on {target.name}, the backup target itself: one lost host "
            "loses both copies",
            path,
            hint="put the offsite copy on a host in another rack (or site)",
        )
    elif target.rack is not None and offsite.rack == target.rack:
        yield Finding(
            "backup-offsite",
            f"the offsite copy on {offsite.name} is in rack {target.rack}, the rack of the "
            f"backup target {target.name}: a rack's power or switch failure takes both",
            path,
            severity="warning",
            hint="put the offsite copy on a host in another rack",
        )
