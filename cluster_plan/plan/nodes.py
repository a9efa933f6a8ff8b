"""Node groups -> the plan's individual nodes, in a stable order."""

from __future__ import annotations

import re
import string
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from cluster_plan.plan.findings import Finding

MAX_LABEL = 63  # characters in a DNS label


@dataclass(frozen=True)
class Node:
    name: str
    group: str
    index: int
    rack: str | None
    hardware: str
    roles: tuple[str, ...]
    pool: str | None
    networks: tuple[str, ...]
    pins: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    extra_disks: tuple[dict[str, Any], ...] = ()


def hostname_pattern_problem(pattern: str) -> str | None:
    """Why a hostname pattern cannot be formatted with ``n``, or None when it can."""
    try:
        parsed = [
            (f, spec or "") for _, f, spec, _ in string.Formatter().parse(pattern) if f is not None
        ]
    except ValueError as exc:
        return f"the pattern is not a valid format string ({exc})"
    fields = [f for f, _ in parsed]
    if not fields:
        return None
    # A width such as {n:0999999999d} would build gigabyte names before any check saw them.
    for _, spec in parsed:
        if "{" in spec:
            return "the pattern nests a field in a format spec"
        width = max((int(w) for w in re.findall(r"\d+", spec)), default=0)
        if width > MAX_LABEL:
            return (
                f"the pattern pads a field to {width} characters; a host name has at most "
                f"{MAX_LABEL}"
            )
    unknown = sorted({f for f in fields if f.split(".")[0].split("[")[0] != "n"})
    if unknown:
        return f"the pattern uses {', '.join(unknown)}; only {{n}} is known"
    try:
        pattern.format(n=1)
    except (ValueError, IndexError, KeyError, AttributeError, TypeError) as exc:
        return f"the pattern cannot be formatted ({exc})"
    return None


def group_racks(group: dict[str, Any]) -> list[str]:
    if "racks" in group:
        return list(group["racks"])
    if "rack" in group:
        return [group["rack"]]
    return []


def iter_nodes(plan: dict[str, Any]) -> Iterator[Node]:
    """Every node of the plan (defaults filled: cluster_plan.plan.defaults), in node group order,
    then n. Racks are dealt round-robin by n here; placement.place_racks then keeps every
    node where the lock says it stands."""
    for group_name, group in plan.get("node_groups", {}).items():
        pattern = group["hostname"]
        if hostname_pattern_problem(pattern):
            continue
        start = group["start"]
        racks = group_racks(group)
        overrides = group["nodes"] or {}
        networks = tuple(group["networks"])
        for offset in range(group["count"]):
            n = start + offset
            name = pattern.format(n=n)
            override = overrides.get(name, {}) or {}
            rack = override.get("rack") or (racks[offset % len(racks)] if racks else None)
            yield Node(
                name=name,
                group=group_name,
                index=n,
                rack=rack,
                hardware=group["hardware"],
                roles=tuple(group["roles"]),
                pool=group["pool"],
                networks=networks,
                pins=dict(override.get("address", {}) or {}),
                extra_disks=tuple(override.get("disks", ()) or ()),
            )


def hostname_findings(plan: dict[str, Any]) -> list[Finding]:
    """Pattern problems; per-host name problems are checked on the enumerated nodes."""
    findings = []
    for group_name, group in plan.get("node_groups", {}).items():
        pattern = group["hostname"]
        path = ("node_groups", group_name, "hostname")
        problem = hostname_pattern_problem(pattern)
        if problem:
            findings.append(
                Finding(
                    "hostname-pattern",
                    problem,
                    path,
                    hint="e.g. gpu{n:03d} gives gpu001, gpu002, ...",
                )
            )
        elif group["count"] > 1 and pattern.format(n=1) == pattern.format(n=2):
            findings.append(
                Finding(
                    "hostname-pattern",
                    f"every node of the group would get the same name {pattern.format(n=1)!r}",
                    path,
                    hint="put {n} in the pattern, e.g. " + pattern + "{n:02d}",
                )
            )
    return findings
