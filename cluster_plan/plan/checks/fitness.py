"""Hardware fitness: whether the GPUs a workload class is routed to suit its work, and whether a
team's GPU limit fits the pools its classes route to (docs/capacity.md)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

from cluster_plan.plan.catalog import load_catalog
from cluster_plan.plan.checks.base import Plan
from cluster_plan.plan.checks.hints import missing
from cluster_plan.plan.findings import Finding
from cluster_plan.plan.nodes import Node
from cluster_plan.plan.roles import JOB_ROLES

TRAINING_MIN_GPU_MEMORY_GB = 40  # below an A100-40GB, large-model training runs out of memory
HIGH_POWER_BOARD_W = 700  # H100/H200 SXM and up: boards built for training


def class_kind(name: str, wclass: dict[str, Any]) -> str | None:
    """training, inference, ... as the class states it, else read from its name."""
    if wclass.get("kind"):
        return str(wclass["kind"])
    lowered = name.lower()
    if lowered.startswith("train"):
        return "training"
    if lowered.startswith(("infer", "serv")):
        return "inference"
    return None


def has_nvlink(accel: dict[str, Any], entry: dict[str, Any]) -> bool:
    """NVLink between a node's GPUs: an SXM board, NVSwitch, or cards few enough for a bridge."""
    if accel.get("nvswitch") or entry.get("interconnect") == "nvlink":
        return True
    return bool(entry.get("nvlink_bridge")) and accel["count"] <= entry["nvlink_bridge"]


def pool_profiles(plan: Plan, nodes: list[Node]) -> dict[str, dict[str, int]]:
    """pool -> hardware profile -> how many nodes of it the pool holds."""
    pools: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for node in nodes:
        if node.pool:
            pools[node.pool][node.hardware] += 1
    return pools


def check_fitness(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    classes = (plan.get("scheduler") or {}).get("workload_classes") or {}
    pools = pool_profiles(plan, nodes)
    catalog = load_catalog()
    for name, wclass in classes.items():
        path = ("scheduler", "workload_classes", name)
        if wclass.get("requires"):
            yield from _required_models(wclass["requires"], catalog, (*path, "requires"))
            yield from _gpuless(plan, wclass, pools.get(wclass["pool"], {}), path)
        for hardware in sorted(pools.get(wclass["pool"], {})):
            accel = (plan["hardware"].get(hardware) or {}).get("accelerators")
            entry = catalog.get(accel["model"]) if accel else None
            if not accel or entry is None:
                continue
            if wclass.get("requires"):
                yield from _requirements(wclass["requires"], accel, entry, hardware, path)
            elif class_kind(name, wclass) == "training":
                yield from _training(name, accel, entry, hardware, path)
            if class_kind(name, wclass) == "inference":
                yield from _inference(name, accel, entry, hardware, path)


def _required_models(
    needs: dict[str, Any], catalog: dict[str, Any], where: tuple[Any, ...]
) -> Iterator[Finding]:
    """A model the catalog does not know can never be met: no profile may have it."""
    for i, model in enumerate(needs.get("accelerators") or []):
        if model not in catalog:
            yield missing("accelerator model", model, catalog, (*where, "accelerators", i))


def _gpuless(
    plan: Plan, wclass: dict[str, Any], profiles: dict[str, int], path: tuple[Any, ...]
) -> Iterator[Finding]:
    """`requires` states what a class's GPUs need: a pool node without any lacks all of it."""
    bare = [p for p in sorted(profiles) if not (plan["hardware"].get(p) or {}).get("accelerators")]
    if bare:
        yield Finding(
            "class-requirement",
            f"the class states what its GPUs need (requires), but its pool {wclass['pool']} "
            f"has nodes without any ({', '.join(bare)})",
            (*path, "requires"),
            hint="route the class to a pool with GPUs, or remove requires for CPU work",
        )


def _requirements(
    needs: dict[str, Any],
    accel: dict[str, Any],
    entry: dict[str, Any],
    hardware: str,
    path: tuple[Any, ...],
) -> Iterator[Finding]:
    model = accel["model"]
    where = (*path, "requires")
    models = needs.get("accelerators")
    if models and model not in models:
        yield Finding(
            "class-requirement",
            f"the class needs {' or '.join(models)}, but its pool has {hardware} ({model})",
            (*where, "accelerators"),
            hint="route the class to a pool of those models, or widen requires.accelerators",
        )
    memory = needs.get("gpu_memory_gb")
    if memory is not None and (entry.get("memory_gb") or 0) < memory:
        yield Finding(
            "class-requirement",
            f"the class needs {memory:g} GB per GPU, but {hardware}'s {model} has "
            f"{entry.get('memory_gb') or 'unknown'} GB",
            (*where, "gpu_memory_gb"),
            hint="route the class to a pool of larger GPUs",
        )
    if needs.get("nvlink") and not (accel["count"] > 1 and has_nvlink(accel, entry)):
        why = "one GPU per node" if accel["count"] == 1 else "no NVLink between its GPUs"
        yield Finding(
            "class-requirement",
            f"the class needs NVLink between a node's GPUs, but {hardware} has {why} "
            f"({accel['count']} x {model})",
            (*where, "nvlink"),
            hint="route the class to SXM (HGX) nodes, or set accelerators.nvswitch where the "
            "board has it",
        )


def _training(
    name: str, accel: dict[str, Any], entry: dict[str, Any], hardware: str, path: tuple[Any, ...]
) -> Iterator[Finding]:
    model, memory = accel["model"], entry.get("memory_gb")
    if memory is not None and memory < TRAINING_MIN_GPU_MEMORY_GB:
        yield Finding(
            "training-gpu-memory",
            f"training class {name} runs on {hardware}, whose {model} has {memory} GB; "
            f"training large models wants {TRAINING_MIN_GPU_MEMORY_GB} GB or more per GPU",
            (*path, "pool"),
            severity="warning",
            hint="route training to larger GPUs, or state what the work needs in "
            "requires.gpu_memory_gb",
        )
    if accel["count"] > 1 and not has_nvlink(accel, entry):
        yield Finding(
            "training-without-nvlink",
            f"training class {name} runs on {hardware}: {accel['count']} x {model} per node "
            "with no NVLink between them, so multi-GPU jobs exchange gradients over PCIe",
            (*path, "pool"),
            severity="warning",
            hint="route training to SXM (HGX) nodes, or set requires.nvlink: false for work "
            "that keeps to one GPU",
        )


def _inference(
    name: str, accel: dict[str, Any], entry: dict[str, Any], hardware: str, path: tuple[Any, ...]
) -> Iterator[Finding]:
    board = entry.get("board_power_w") or 0
    if board < HIGH_POWER_BOARD_W:
        return
    yield Finding(
        "inference-power",
        f"inference class {name} runs on {hardware}: {accel['model']} boards draw {board} W "
        f"each ({accel['count'] * board / 1000:g} kW of GPUs per node); an L40S draws 350 W, "
        "an L4 72 W",
        (*path, "pool"),
        severity="warning",
        hint="serve models that fit on smaller boards from an L40S or L4 pool; suppress with a "
        "reason when the models need this memory or NVLink",
    )


def check_team_pools(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    """A team's GPU limit against the GPUs of the pools its classes route to. A limit above
    the whole cluster is check_teams' finding; this one is the limit above the team's pools."""
    teams = plan.get("teams") or {}
    classes = (plan.get("scheduler") or {}).get("workload_classes") or {}
    share = pool_gpus(plan, nodes)
    total = sum(share.values())
    for name, team in teams.items():
        limit = (team.get("limits") or {}).get("gpus")
        pools = sorted({classes[c]["pool"] for c in team.get("classes") or [] if c in classes})
        held = sum(share.get(p, 0) for p in pools)
        if limit is not None and held < limit <= total:
            yield Finding(
                "limit-exceeds-pools",
                f"team {name} may use {limit:g} GPU{'' if limit == 1 else 's'}, but the pools "
                f"its classes route to ({', '.join(pools) or 'none'}) hold {held}",
                ("teams", name, "limits", "gpus"),
                severity="warning",
                hint="lower the limit, or give the team a class on another pool",
            )


def pool_gpus(plan: Plan, nodes: Sequence[Node]) -> dict[str, int]:
    """pool -> NVIDIA GPUs on its compute nodes."""
    catalog = load_catalog()
    # a node group's nodes share pool, profile and roles: count them once per group
    groups = Counter((n.group, n.pool, n.hardware, n.roles) for n in nodes if n.pool)
    out: dict[str, int] = defaultdict(int)
    for (_, pool, hardware, roles), count in groups.items():
        accel = (plan["hardware"].get(hardware) or {}).get("accelerators")
        if not accel or not JOB_ROLES.intersection(roles):
            continue
        if catalog.get(accel["model"], {}).get("vendor") == "nvidia":
            out[pool] += accel["count"] * count
    return dict(out)
