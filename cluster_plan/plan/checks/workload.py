"""Where work runs: workload classes and the pools they route to, and datasets near them."""

from __future__ import annotations

import difflib
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from cluster_plan.plan.catalog import load_catalog
from cluster_plan.plan.checks.base import Plan, first_names
from cluster_plan.plan.checks.hints import missing
from cluster_plan.plan.checks.references import declared_racks
from cluster_plan.plan.findings import Finding
from cluster_plan.plan.nodes import Node, hostname_pattern_problem
from cluster_plan.plan.roles import ALL_ROLES, WORKER_ROLES

# the role that makes a node run work, per scheduler
# Slurm's time formats: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, and no limit
SLURM_TIME = re.compile(
    r"^(UNLIMITED|INFINITE|-1|\d+(:\d{1,2}){0,2}|\d+-\d{1,2}(:\d{1,2}){0,2})$", re.IGNORECASE
)
_KIND_WORDS = {"gpu": "NVIDIA GPU", "accelerator": "accelerator", "cpu": "CPU-only"}


def node_kind(plan: Plan, node: Node) -> str | None:
    """gpu, accelerator or cpu; None when the profile or model is unknown (reported as such)."""
    profile = plan["hardware"].get(node.hardware)
    if not isinstance(profile, dict):
        return None
    accel = profile.get("accelerators")
    if not accel:
        return "cpu"
    entry = load_catalog().get(accel["model"])
    if entry is None:
        return None
    return "gpu" if entry.get("vendor") == "nvidia" else "accelerator"


def check_workload_classes(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    scheduler = plan.get("scheduler")
    if not scheduler or scheduler["type"] not in WORKER_ROLES:
        return
    pools: dict[str, list[Node]] = defaultdict(list)
    for node in nodes:
        if node.pool:
            pools[node.pool].append(node)
    declared = {g.get("pool") for g in plan["node_groups"].values() if g.get("pool")}
    classes = scheduler.get("workload_classes") or {}
    for name, wclass in classes.items():
        path = ("scheduler", "workload_classes", name)
        pool = wclass["pool"]
        if pool not in declared:
            yield _unknown_pool(plan, wclass, sorted(declared), pools, (*path, "pool"))
        elif not pools.get(pool):
            if not _pool_explained(plan, pool):
                yield Finding(
                    "empty-pool",
                    f"pool {pool} has no nodes",
                    (*path, "pool"),
                    hint="give a node group with count > 0 the pool",
                )
        else:
            yield from _pool_fits_class(plan, name, wclass, pools[pool], path)
    yield from _unschedulable_pools(plan, scheduler["type"], classes, pools)
    yield from _defaults(classes)
    for name, wclass in classes.items():
        limit = wclass.get("max_time")
        if isinstance(limit, str) and not SLURM_TIME.match(limit):
            yield Finding(
                "time-format",
                f"max_time {limit!r} is not a Slurm time limit",
                ("scheduler", "workload_classes", name, "max_time"),
                hint="minutes, [days-]hours:minutes:seconds (e.g. 7-00:00:00, 48:00:00) or "
                "UNLIMITED",
            )


def _defaults(classes: dict[str, Any]) -> Iterator[Finding]:
    defaults = [name for name, wclass in classes.items() if wclass.get("default")]
    if len(defaults) > 1:
        yield Finding(
            "multiple-defaults",
            f"classes {', '.join(defaults)} are all default",
            ("scheduler", "workload_classes", defaults[1], "default"),
        )
    elif classes and not defaults:
        yield Finding(
            "no-default-class",
            "no workload class is the default; work that declares no class has nowhere to go",
            ("scheduler", "workload_classes"),
            severity="warning",
        )


def _pool_explained(plan: Plan, pool: str) -> bool:
    """Whether the pool is empty because of a mistake already reported elsewhere (a count or
    hostname pattern that is wrong): only a pool whose groups all say count: 0 is empty."""
    for group in plan["node_groups"].values():
        if group.get("pool") != pool:
            continue
        count = group.get("count")
        if type(count) is not int or count != 0:
            return True
        if not isinstance(group.get("hostname"), str) or hostname_pattern_problem(
            group["hostname"]
        ):
            return True
    return False


def _wanted_kind(wclass: dict[str, Any]) -> str | None:
    needs = wclass.get("needs", "any")
    if needs in _KIND_WORDS:
        return str(needs)
    words = str(wclass["pool"]).replace("_", "-").split("-")
    return "cpu" if "cpu" in words else "gpu" if "gpu" in words else None


def _unknown_pool(
    plan: Plan,
    wclass: dict[str, Any],
    declared: list[str],
    pools: dict[str, list[Node]],
    path: tuple[Any, ...],
) -> Finding:
    """Suggest only a pool of the kind the class asks for: cpu and gpu are one letter apart."""
    pool = wclass["pool"]
    wanted = _wanted_kind(wclass)
    kinds = {name: {node_kind(plan, n) for n in pools.get(name, [])} for name in declared}

    def fits(name: str) -> bool:
        have = kinds[name] - {None}
        if wanted is None or not have:
            return True
        return have <= ({"gpu", "accelerator"} if wanted == "accelerator" else {wanted})

    candidates = [name for name in declared if fits(name)]
    close = difflib.get_close_matches(pool, candidates, n=1)
    if close:
        hint = f"did you mean {close[0]!r}?"
    elif wanted and declared:
        described = ", ".join(f"{n} ({_describe_kinds(kinds[n])})" for n in declared)
        hint = (
            f"no pool of {_KIND_WORDS[wanted]} nodes exists (pools: {described}); give a node "
            f"group pool: {pool}"
        )
    else:
        hint = "known pools: " + ", ".join(declared) if declared else "no node group has a pool"
    return Finding("unknown-reference", f"pool {pool!r} is not defined", path, hint=hint)


def _describe_kinds(kinds: set[str | None]) -> str:
    known = sorted(k for k in kinds if k is not None)
    return " and ".join(_KIND_WORDS[k] for k in known) + " nodes" if known else "no nodes"


def _pool_fits_class(
    plan: Plan, name: str, wclass: dict[str, Any], members: list[Node], path: tuple[Any, ...]
) -> Iterator[Finding]:
    needs = wclass.get("needs", "any")
    for node in members:
        kind = node_kind(plan, node)
        if kind is None:
            continue  # an unknown profile or model is reported as such
        lacking = (needs == "gpu" and kind != "gpu") or (needs == "accelerator" and kind == "cpu")
        if lacking:
            what = "NVIDIA GPUs" if needs == "gpu" else "accelerators"
            yield Finding(
                "pool-lacks-accelerator",
                f"class {name} needs {what}, but pool {wclass['pool']} has {node.name} "
                f"({node.hardware}) without them",
                (*path, "needs"),
            )
            return


def _unschedulable_pools(
    plan: Plan, kind: str, classes: dict[str, Any], pools: dict[str, list[Node]]
) -> Iterator[Finding]:
    """Work routed to a pool runs only on its nodes that run the scheduler's worker."""
    roles = sorted(WORKER_ROLES[kind])
    others = {r for k, rs in WORKER_ROLES.items() if k != kind for r in rs}
    routed = {wclass["pool"]: name for name, wclass in classes.items()}
    reported: set[str] = set()
    for pool, members in pools.items():
        if pool not in routed:
            continue
        for node in members:
            if node.group in reported or any(r in node.roles for r in roles):
                continue
            # a role of the other scheduler, or a misspelt one, is reported as such
            if any(r in others or r not in ALL_ROLES for r in node.roles):
                continue
            reported.add(node.group)
            yield Finding(
                "pool-not-schedulable",
                f"group {node.group} is in pool {pool} (class {routed[pool]}), but its nodes "
                f"lack the role {' or '.join(roles)}: {kind} would never run work on them",
                ("node_groups", node.group, "roles"),
                hint=f"add {roles[0]} to the group's roles, or take it out of the pool",
            )


def check_datasets(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    """Jobs naming a dataset prefer nodes in its racks; that preference must be reachable by
    some pool that work is routed to (or, without workload classes, some compute node)."""
    scheduler = plan.get("scheduler")
    if not scheduler or scheduler["type"] not in WORKER_ROLES:
        return
    racks = declared_racks(plan)
    routed = _routed_pools(scheduler)
    takes_work = _takes_work(routed, WORKER_ROLES[scheduler["type"]])
    workers = [n for n in nodes if takes_work(n.pool, n.roles)]
    in_doubt = _placement_in_doubt(plan, nodes, workers, takes_work, racks)
    pools = sorted(routed) if routed is not None else None
    for name, dataset in (scheduler.get("datasets") or {}).items():
        path = ("scheduler", "datasets", name, "racks")
        if not isinstance(dataset["racks"], list):
            continue  # a type error in the schema, not unknown racks one letter each
        yield from _unknown_racks(dataset["racks"], racks, path)
        held = [r for r in dataset["racks"] if r in racks]
        if not in_doubt and _out_of_reach(held, workers):
            yield _unreachable_dataset(name, held, nodes, pools, path)


def _out_of_reach(held: list[str], workers: list[Node]) -> bool:
    """A dataset in declared racks where no node that takes work stands."""
    return bool(held) and not any(n.rack in held for n in workers)


def _unknown_racks(named: list[Any], racks: set[str], path: tuple[Any, ...]) -> Iterator[Finding]:
    for i, rack in enumerate(named):
        if rack not in racks:
            yield missing("rack", rack, sorted(racks), (*path, i))


def _placement_in_doubt(
    plan: Plan,
    nodes: list[Node],
    workers: list[Node],
    takes_work: Callable[[Any, Any], bool],
    racks: set[str],
) -> bool:
    """Where the working nodes stand is unknown: a group whose nodes could not all be made,
    or a node in an undeclared rack (both reported by their own checks)."""
    produced = Counter(n.group for n in nodes)
    short = any(
        produced[name] != group.get("count")
        for name, group in plan["node_groups"].items()
        if takes_work(group.get("pool"), group.get("roles") or [])
    )
    return short or any(n.rack not in racks for n in workers)


def _routed_pools(scheduler: dict[str, Any]) -> set[str] | None:
    """The pools the workload classes route work to; None in a plan without classes."""
    classes = scheduler.get("workload_classes") or {}
    return {wclass["pool"] for wclass in classes.values()} if classes else None


def _takes_work(routed: set[str] | None, roles: Iterable[str]) -> Callable[[Any, Any], bool]:
    """Whether a node or group (its pool, its roles) takes the scheduler's work: in a pool that
    a workload class routes to, or, without workload classes, with a compute role."""
    if routed is not None:
        return lambda pool, _roles: pool in routed
    wanted = set(roles)
    return lambda _pool, have: bool(wanted & set(have))


def _unreachable_dataset(
    name: str,
    held: list[str],
    nodes: list[Node],
    pools: list[str] | None,
    path: tuple[Any, ...],
) -> Finding:
    there = [n.name for r in held for n in nodes if n.rack == r]
    where = f"rack{'s' if len(held) > 1 else ''} {', '.join(held)}"
    target = (
        f"pool{'s' if len(pools) > 1 else ''} {', '.join(pools)} that work is routed to"
        if pools
        else "compute nodes"
    )
    if not there:
        what = f"{where}, which hold{'s' if len(held) == 1 else ''} no nodes"
    else:
        shown = first_names(there)
        what = f"{where}, whose nodes ({shown}) are not in the {target}"
    return Finding(
        "dataset-unreachable",
        f"dataset {name} lives in {what}: jobs naming it can never run next to it",
        path,
        severity="warning",
        hint="list the racks where the nodes that read it stand",
    )
