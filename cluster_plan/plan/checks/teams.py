"""Teams: their users, the classes they may use, their hierarchy and whether their limits fit
the cluster the plan describes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from cluster_plan.plan.catalog import load_catalog
from cluster_plan.plan.checks.accounts import SYSTEM_USERS
from cluster_plan.plan.checks.base import Plan
from cluster_plan.plan.checks.hints import missing
from cluster_plan.plan.checks.workload import SLURM_TIME
from cluster_plan.plan.findings import Finding
from cluster_plan.plan.nodes import Node
from cluster_plan.plan.roles import JOB_ROLES

PERIOD_HOURS = {"daily": 24, "weekly": 168, "monthly": 744, "quarterly": 2208, "yearly": 8784}


def check_teams(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    teams = plan.get("teams") or {}
    if not teams:
        return
    scheduler = plan.get("scheduler") or {}
    slurm = scheduler.get("slurm") or {}
    if scheduler.get("type") == "slurm" and not slurm.get("accounting"):
        yield Finding(
            "teams-without-accounting",
            "teams need Slurm accounting: without slurmdbd Slurm enforces no team limit, "
            "fair share or class",
            ("teams",),
            hint="set scheduler.slurm.accounting: true and give one node the role slurmdbd",
        )
    if scheduler.get("type") == "kubernetes":
        yield from _slurm_only_limits(teams)
    classes = list(scheduler.get("workload_classes") or {})
    for name, team in teams.items():
        for i, wclass in enumerate(team.get("classes") or []):
            if wclass not in classes:
                yield missing("workload class", wclass, classes, ("teams", name, "classes", i))
    yield from _hierarchy(teams)
    yield from _users(plan, teams)
    yield from _limits(plan, teams, nodes)


def _slurm_only_limits(teams: dict[str, Any]) -> Iterator[Finding]:
    """A GPU-hour budget is Slurm's; a Kubernetes plan enforces none."""
    for name, team in teams.items():
        if (team.get("limits") or {}).get("gpu_hours") is not None:
            yield Finding(
                "not-enforced",
                f"team {name}'s gpu_hours is a Slurm budget: Kubernetes enforces none",
                ("teams", name, "limits", "gpu_hours"),
                severity="warning",
                hint="Kubernetes enforces gpus, accelerators, classes and max_time",
            )


def _hierarchy(teams: dict[str, Any]) -> Iterator[Finding]:
    children = Counter(t.get("parent") for t in teams.values() if t.get("parent"))
    in_cycles: set[str] = set()
    for name, team in teams.items():
        parent = team.get("parent")
        if parent is not None and parent not in teams:
            yield missing("team", parent, list(teams), ("teams", name, "parent"))
        elif parent is not None and name not in in_cycles and _in_cycle(teams, name):
            chain = _chain(teams, name)
            in_cycles.update(chain)  # one finding per cycle, at its first team
            yield Finding(
                "team-cycle",
                f"team {name} is its own ancestor: {' -> '.join(chain)}",
                ("teams", name, "parent"),
            )
        if not team.get("users") and not children[name]:
            yield Finding(
                "team-without-users",
                f"team {name} has no users and no child teams: nobody can run work in it",
                ("teams", name),
                severity="warning",
            )


def _chain(teams: dict[str, Any], name: str) -> list[str]:
    chain = [name]
    while (parent := teams.get(chain[-1], {}).get("parent")) in teams and parent not in chain:
        chain.append(parent)
    parent = teams.get(chain[-1], {}).get("parent")
    return [*chain, parent] if parent in chain else chain


def _in_cycle(teams: dict[str, Any], name: str) -> bool:
    chain = _chain(teams, name)
    return chain[-1] == name and len(chain) > 1


def _users(plan: Plan, teams: dict[str, Any]) -> Iterator[Finding]:
    admins = (plan.get("access") or {}).get("admin_users") or []
    names: dict[str, str] = {u["name"]: "access.admin_users" for u in admins}
    uids: dict[int, str] = {}
    for team_name, team in teams.items():
        for i, user in enumerate(team.get("users") or []):
            path = ("teams", team_name, "users", i)
            name, uid = user["name"], user["uid"]
            if name in SYSTEM_USERS:
                yield Finding(
                    "reserved-user",
                    f"user {name} is a system account of the nodes",
                    (*path, "name"),
                    hint="give the person a login of their own",
                )
            elif name in names:
                yield Finding(
                    "duplicate-user",
                    f"user {name} is already in {names[name]}; a user belongs to one team",
                    (*path, "name"),
                )
            else:
                names[name] = f"team {team_name}"
            if uid in uids:
                yield Finding(
                    "duplicate-uid",
                    f"UID {uid} of {name} is already {uids[uid]}'s",
                    (*path, "uid"),
                )
            else:
                uids[uid] = name


def _capacity(plan: Plan, nodes: list[Node]) -> tuple[int, int]:
    """(NVIDIA GPUs, the most accelerators of any other type) on the compute nodes."""
    catalog = load_catalog()
    gpus = 0
    others: Counter[str] = Counter()
    for node in nodes:
        accel = plan["hardware"].get(node.hardware, {}).get("accelerators")
        if not accel or not JOB_ROLES.intersection(node.roles):
            continue
        entry = catalog.get(accel["model"], {})
        if entry.get("vendor") == "nvidia":
            gpus += accel["count"]
        else:
            others[entry.get("gres_type", accel["model"])] += accel["count"]
    return gpus, max(others.values(), default=0)


def _limits(plan: Plan, teams: dict[str, Any], nodes: list[Node]) -> Iterator[Finding]:
    gpus, accelerators = _capacity(plan, nodes)
    period = ((plan.get("scheduler") or {}).get("slurm") or {}).get("usage_period")
    held = {"gpus": (gpus, "NVIDIA GPUs"), "accelerators": (accelerators, "accelerators")}
    if period in PERIOD_HOURS:
        held["gpu_hours"] = (gpus * PERIOD_HOURS[period], f"GPU-hours a {period} period holds")
    for name, team in teams.items():
        limits = team.get("limits") or {}
        limit = limits.get("max_time")
        if isinstance(limit, str) and not SLURM_TIME.match(limit):
            yield Finding(
                "time-format",
                f"max_time {limit!r} is not a Slurm time limit",
                ("teams", name, "limits", "max_time"),
                hint="minutes, [days-]hours:minutes:seconds (e.g. 1-00:00:00, 48:00:00) or "
                "UNLIMITED",
            )
        yield from _over_capacity(name, limits, held)
        yield from _over_parent(name, team, teams.get(team.get("parent") or ""))


def _over_capacity(
    name: str, limits: dict[str, Any], held: Mapping[str, tuple[float, str]]
) -> Iterator[Finding]:
    """A team limit larger than what the compute nodes hold (it can never bind)."""
    for key, (capacity, what) in held.items():
        value = limits.get(key)
        if value is not None and value > capacity:
            yield Finding(
                "limit-exceeds-capacity",
                f"team {name} may use {value:g} {key.replace('_', '-')}, but the compute "
                f"nodes have {capacity:g} {what}",
                ("teams", name, "limits", key),
                severity="warning",
            )


def _over_parent(name: str, team: dict[str, Any], parent: Any) -> Iterator[Finding]:
    """A team limit larger than its parent's (the parent's applies)."""
    limits = team.get("limits") or {}
    theirs_all = (parent or {}).get("limits") or {}
    for key in ("gpus", "accelerators", "gpu_hours"):
        mine, theirs = limits.get(key), theirs_all.get(key)
        if mine is not None and theirs is not None and mine > theirs:
            yield Finding(
                "limit-exceeds-parent",
                f"team {name} may use {mine:g} {key.replace('_', '-')}, more than its parent "
                f"{team['parent']} ({theirs:g}): the parent's limit applies",
                ("teams", name, "limits", key),
                severity="warning",
            )
