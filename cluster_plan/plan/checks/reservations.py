"""Slurm reservations: when they are, what they hold, and whether Slurm can create them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cluster_plan.plan.checks.base import Plan, first_names
from cluster_plan.plan.checks.hints import missing
from cluster_plan.plan.findings import Finding
from cluster_plan.plan.nodes import Node

NOW_VARIABLE = "CLUSTER_PLAN_NOW"
# reservations that repeat are never over, and their windows are not one span of time
RECURRING_FLAGS = {"daily", "weekly"}
# flags with which a reservation may take nodes another reservation holds at that time
SHARING_FLAGS = {"overlap", "maint"}


@dataclass(frozen=True)
class Window:
    name: str
    start: datetime
    end: datetime
    hosts: frozenset[str]
    flags: frozenset[str]


def plan_now() -> tuple[datetime, Finding | None]:
    """The time that reservations are judged against: now, or CLUSTER_PLAN_NOW (ISO 8601) for
    reproducible runs (tests, CI checking a plan as of a date)."""
    text = os.environ.get(NOW_VARIABLE)
    if not text:
        return datetime.now(UTC), None
    try:
        fixed = datetime.fromisoformat(text)
    except ValueError:
        return datetime.now(UTC), Finding(
            "environment",
            f"{NOW_VARIABLE}={text!r} is not an ISO 8601 time; using the clock",
            ("scheduler", "reservations"),
            severity="warning",
        )
    return (fixed if fixed.tzinfo else fixed.replace(tzinfo=UTC)), None


def check_reservations(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    scheduler = plan.get("scheduler")
    if not scheduler or scheduler["type"] != "slurm":
        return  # a Kubernetes plan's reservations are reported as the other scheduler's
    reservations = scheduler.get("reservations") or {}
    if not reservations:
        return
    now, problem = plan_now()
    if problem:
        yield problem
    windows = []
    for name, reservation in reservations.items():
        yield from _references(plan, nodes, name, reservation)
        yield from _compute_nodes(plan, nodes, name, reservation)
        window = _window(plan, nodes, name, reservation)
        if isinstance(window, Finding):
            yield window
            continue
        if window.end <= now and not window.flags & RECURRING_FLAGS:
            yield Finding(
                "reservation-past",
                f"reservation {name} ended at {window.end.isoformat(timespec='minutes')}, "
                f"before now ({now.isoformat(timespec='minutes')}): it reserves nothing",
                ("scheduler", "reservations", name, "start"),
                severity="warning",
                hint="move it to a coming window, or remove it",
            )
        windows.append(window)
    yield from _overlaps(windows)


def _cluster_zone(plan: Plan) -> tzinfo:
    """Slurm reads reservation times in the controller's time zone, the cluster's."""
    name = plan["cluster"].get("timezone")
    if isinstance(name, str):
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            pass  # reported by check_cluster
    return UTC


def _hosts(plan: Plan, nodes: list[Node], reservation: dict[str, Any]) -> set[str]:
    groups = set(reservation.get("node_groups") or [])
    return {n.name for n in nodes if n.group in groups} | set(reservation.get("nodes") or [])


def _window(
    plan: Plan, nodes: list[Node], name: str, reservation: dict[str, Any]
) -> Window | Finding:
    """The reservation's span of time, or the finding that says why it has none."""
    path = ("scheduler", "reservations", name)
    try:
        start = datetime.fromisoformat(reservation["start"])
    except ValueError:
        return Finding(
            "format",
            f"start {reservation['start']!r} is not an ISO 8601 time",
            (*path, "start"),
            hint='e.g. "2027-01-05T02:00:00"',
        )
    if start.tzinfo is None:
        start = start.replace(tzinfo=_cluster_zone(plan))
    try:  # Python's datetime holds the years 1 to 9999 (in UTC too)
        end = start + timedelta(minutes=reservation["duration_minutes"])
        start.astimezone(UTC), end.astimezone(UTC)
    except OverflowError:
        return Finding(
            "range",
            f"reservation {name} starting {reservation['start']!r} for "
            f"{reservation['duration_minutes']} minutes does not fit in the years 1 to 9999",
            (*path, "duration_minutes"),
            hint='give a start and a duration within the calendar, e.g. "2027-01-05T02:00:00"',
        )
    flags = frozenset(reservation.get("flags") or [])
    return Window(name, start, end, frozenset(_hosts(plan, nodes, reservation)), flags)


def _references(
    plan: Plan, nodes: list[Node], name: str, reservation: dict[str, Any]
) -> Iterator[Finding]:
    path = ("scheduler", "reservations", name)
    for i, group in enumerate(reservation.get("node_groups") or []):
        if group not in plan["node_groups"]:
            yield missing("node group", group, list(plan["node_groups"]), (*path, "node_groups", i))
    hosts = sorted(n.name for n in nodes)
    for i, host in enumerate(reservation.get("nodes") or []):
        if host not in hosts:
            yield missing("host", host, hosts[:50], (*path, "nodes", i))
    if not reservation.get("node_groups") and not reservation.get("nodes"):
        yield Finding("missing-key", "a reservation needs node_groups or nodes", path)


def _compute_nodes(
    plan: Plan, nodes: list[Node], name: str, reservation: dict[str, Any]
) -> Iterator[Finding]:
    """Slurm reserves nodes that slurmd runs on; the others are not Slurm's to reserve."""
    known = {n.name: n for n in nodes}
    named = sorted(h for h in _hosts(plan, nodes, reservation) if h in known)
    outside = [h for h in named if "slurm_compute" not in known[h].roles]
    if not outside:
        return
    shown = first_names(outside)
    rest = "nothing is reserved" if len(outside) == len(named) else "they are left out"
    yield Finding(
        "reservation-not-compute",
        f"reservation {name} names {shown}, which lack the role slurm_compute: {rest}",
        ("scheduler", "reservations", name),
        severity="warning",
        hint="reserve compute nodes (node groups with slurm_compute)",
    )


def _overlaps(windows: list[Window]) -> Iterator[Finding]:
    """Slurm refuses a reservation of nodes another one holds at the same time, unless the
    later one may share them (OVERLAP or MAINT); recurring windows are left out."""
    once = [w for w in windows if not w.flags & RECURRING_FLAGS]
    for i, later in enumerate(once):
        if later.flags & SHARING_FLAGS:
            continue
        for earlier in once[:i]:
            shared = sorted(later.hosts & earlier.hosts)
            if shared and later.start < earlier.end and earlier.start < later.end:
                yield Finding(
                    "reservation-overlap",
                    f"reservation {later.name} holds {', '.join(shared[:3])}"
                    f"{', ...' if len(shared) > 3 else ''} while reservation {earlier.name} "
                    "does: Slurm refuses to create it",
                    ("scheduler", "reservations", later.name, "start"),
                    hint="move one window, or give it flags: [overlap]",
                )
                break
