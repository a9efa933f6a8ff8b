"""The capacity model of a plan: what each pool holds and draws, what each rack draws against
its budgets, and what share of the pools each team's limits give it.

Pure: the plan (defaults filled) and its placed nodes in, plain data out (JSON-ready), for the
text, JSON and HTML shells in cluster_plan.views.capacity_report and the graph's rack bars.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from cluster_plan.plan.catalog import load_catalog
from cluster_plan.plan.checks.fitness import pool_gpus
from cluster_plan.plan.findings import Finding
from cluster_plan.plan.nodes import Node
from cluster_plan.plan.power import RackPower, node_power, rack_power, settings

NO_POOL = "(no pool)"  # infrastructure nodes: controllers, storage, management
# The findings the capacity report repeats: power, cooling, fitness and team shares.
CAPACITY_CODES = frozenset(
    {
        "rack-power",
        "rack-cooling",
        "rack-utilization",
        "rack-density",
        "air-cooling-limit",
        "power-unknown",
        "power-budget",
        "class-requirement",
        "training-gpu-memory",
        "training-without-nvlink",
        "inference-power",
        "limit-exceeds-pools",
        "limit-exceeds-capacity",
    }
)


def _round(value: float, places: int = 1) -> float:
    return round(value, places)


def _pools(plan: dict[str, Any], nodes: Sequence[Node], typical: float) -> list[dict[str, Any]]:
    catalog = load_catalog()
    classes = (plan.get("scheduler") or {}).get("workload_classes") or {}
    rows: dict[str, dict[str, Any]] = {}
    for node in nodes:
        pool = node.pool or NO_POOL
        row = rows.setdefault(pool, _empty_pool(pool, classes))
        profile = plan["hardware"].get(node.hardware) or {}
        draw = node_power(profile)
        row["nodes"] += 1
        row["peak_kw"] += draw.peak_w / 1000
        row["typical_kw"] += draw.peak_w * typical / 1000
        accel = profile.get("accelerators")
        if not accel:
            continue
        entry = catalog.get(accel["model"], {})
        row["gpus"][accel["model"]] = row["gpus"].get(accel["model"], 0) + accel["count"]
        row["gpu_memory_gb"] += (entry.get("memory_gb") or 0) * accel["count"]
        row["bf16_pflops"] += (entry.get("bf16_tflops") or 0) * accel["count"] / 1000
    for row in rows.values():
        for key in ("peak_kw", "typical_kw", "gpu_memory_gb", "bf16_pflops"):
            row[key] = _round(row[key])
    return sorted(rows.values(), key=lambda r: (r["pool"] == NO_POOL, r["pool"]))


def _empty_pool(pool: str, classes: dict[str, Any]) -> dict[str, Any]:
    return {
        "pool": pool,
        "classes": sorted(n for n, c in classes.items() if c.get("pool") == pool),
        "nodes": 0,
        "gpus": {},
        "gpu_memory_gb": 0.0,
        "bf16_pflops": 0.0,
        "peak_kw": 0.0,
        "typical_kw": 0.0,
    }


def _pct(draw: float, budget: float | None) -> float | None:
    return None if not budget else _round(100 * draw / budget)


def _rack_row(rack: RackPower) -> dict[str, Any]:
    def kw(watts: float | None) -> float | None:
        return None if watts is None else _round(watts / 1000)

    return {
        "rack": rack.rack,
        "nodes": rack.nodes,
        "peak_kw": kw(rack.peak_w),
        "typical_kw": kw(rack.typical_w),
        "power_kw": kw(rack.power_budget_w),
        "cooling_kw": kw(rack.cooling_budget_w),
        "cooling_kind": rack.cooling_kind,
        "power_pct": _pct(rack.peak_w, rack.power_budget_w),
        "cooling_pct": _pct(rack.peak_w, rack.cooling_budget_w),
        "largest": [
            {"group": c.group, "hardware": c.hardware, "nodes": c.nodes, "kw": kw(c.peak_w)}
            for c in rack.largest()
        ],
        "unknown_draw": list(rack.unknown),
    }


def _teams(plan: dict[str, Any], nodes: Sequence[Node]) -> list[dict[str, Any]]:
    classes = (plan.get("scheduler") or {}).get("workload_classes") or {}
    held = pool_gpus(plan, nodes)
    rows = []
    for name, team in (plan.get("teams") or {}).items():
        pools = sorted({classes[c]["pool"] for c in team.get("classes") or [] if c in classes})
        gpus = sum(held.get(p, 0) for p in pools)
        limit = (team.get("limits") or {}).get("gpus")
        rows.append(
            {
                "team": name,
                "classes": list(team.get("classes") or []),
                "pools": pools,
                "pool_gpus": gpus,
                "limit_gpus": limit,
                "share_pct": _pct(limit, gpus) if limit is not None else None,
            }
        )
    return rows


def capacity_model(
    plan: dict[str, Any], nodes: Sequence[Node], findings: Iterable[Finding] = ()
) -> dict[str, Any]:
    """The whole report as plain data (see docs/capacity.md for each field)."""
    limits = settings(plan)
    found = list(findings)
    racks = [_rack_row(r) for r in rack_power(plan, nodes).values()]
    pools = _pools(plan, nodes, limits["typical_load_pct"] / 100)
    budgets = [r["power_kw"] for r in racks if r["power_kw"] is not None]
    gpus: dict[str, int] = defaultdict(int)
    for pool in pools:
        for model, count in pool["gpus"].items():
            gpus[model] += count
    return {
        "cluster": (plan.get("cluster") or {}).get("name"),
        "settings": limits,
        "totals": {
            "nodes": len(nodes),
            "gpus": dict(sorted(gpus.items())),
            "peak_kw": _round(sum(p["peak_kw"] for p in pools)),
            "typical_kw": _round(sum(p["typical_kw"] for p in pools)),
            "power_budget_kw": _round(sum(budgets)) if budgets else None,
            "racks": len(racks),
            "racks_with_budget": len(budgets),
        },
        "pools": pools,
        "racks": racks,
        "teams": _teams(plan, nodes),
        "findings": [
            f.as_dict() for f in found if f.code in CAPACITY_CODES and f.suppressed_by is None
        ],
        "suppressed": _suppressed(found),
    }


def _suppressed(findings: list[Finding]) -> list[dict[str, Any]]:
    """Capacity findings the plan suppressed, by code and reason: what the plan says why."""
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for f in findings:
        if f.code in CAPACITY_CODES and f.suppressed_by is not None:
            counts[(f.code, f.suppressed_by)] += 1
    return [{"code": c, "reason": r, "count": n} for (c, r), n in sorted(counts.items())]
