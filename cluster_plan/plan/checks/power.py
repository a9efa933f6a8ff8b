"""Rack power and cooling: the planned draw of each rack against what its feeds deliver and
its cooling removes (cluster_plan.plan.power computes the figures; docs/capacity.md the model)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from cluster_plan.plan.catalog import load_catalog
from cluster_plan.plan.checks.base import Plan
from cluster_plan.plan.findings import Finding
from cluster_plan.plan.nodes import Node
from cluster_plan.plan.power import DENSEST_RACK_KW, RackPower, kw, rack_power, settings

_MOVE = (
    "spread the group over more racks (node_groups.<group>.racks), shrink it, or raise the "
    "rack's budget; a measured hardware.<profile>.power_w replaces the estimate"
)


def check_rack_power(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    declared = plan.get("racks") or {}
    limits = settings(plan)
    for name, spec in declared.items():
        power = (spec or {}).get("power") or {}
        if power.get("kw") is not None and power.get("feeds"):
            yield Finding(
                "power-budget",
                f"rack {name} states its power both as kw and as feeds",
                ("racks", name, "power"),
                hint="keep one: kw for a figure from the facility, feeds to have it computed",
            )
    for name, rack in rack_power(plan, nodes).items():
        if name in declared:
            yield from _rack_findings(rack, limits)


# Unit slips: a figure in kW where W is asked (or the reverse), a fraction for a percentage.
# No server peaks under 100 W; no rack carries seven times the densest built today.
MIN_NODE_W = 100
MAX_RACK_KW = 7 * DENSEST_RACK_KW


def check_power_units(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    del nodes
    for name, profile in (plan.get("hardware") or {}).items():
        yield from _node_power(name, profile or {})
    for name, spec in (plan.get("racks") or {}).items():
        for key in ("power", "cooling"):
            budget = ((spec or {}).get(key) or {}).get("kw")
            if budget is not None and budget > MAX_RACK_KW:
                yield Finding(
                    "power-unit",
                    f"rack {name}'s {key} of {budget:g} kW is {budget / DENSEST_RACK_KW:.0f} "
                    f"times what the densest racks built today carry ({DENSEST_RACK_KW:g} kW): "
                    "W written as kW?",
                    ("racks", name, key, "kw"),
                    hint=f"kw is in kW: kw: {budget / 1000:g} for {budget:g} W",
                )
    section = plan.get("power") or {}
    for key in ("typical_load_pct", "warn_utilization_pct"):
        value = section.get(key)
        if value is not None and value <= 1:
            yield Finding(
                "power-unit",
                f"{key} {value:g} is {value:g} %: a fraction where a percentage is asked?",
                ("power", key),
                hint=f"{key} is a percentage: {key}: {value * 100:g} for {value:g}",
            )


def _node_power(name: str, profile: dict[str, Any]) -> Iterator[Finding]:
    measured = profile.get("power_w")
    if measured is None:
        return
    accel = profile.get("accelerators") or {}
    entry = load_catalog().get(str(accel.get("model")), {})
    boards = float(entry.get("board_power_w") or 0) * (accel.get("count") or 0)
    what = (
        f"{accel['count']} x {accel['model']} boards alone draw {boards:,.0f} W" if boards else ""
    )
    if measured < MIN_NODE_W:
        yield Finding(
            "power-unit",
            f"hardware {name} peaks at {measured:g} W by its power_w; no server draws so little"
            + (f" ({what})" if what else "")
            + ": kW written as W?",
            ("hardware", name, "power_w"),
            hint=f"power_w is in W: power_w: {measured * 1000:g} for {measured:g} kW",
        )
    elif measured < boards:
        yield Finding(
            "power-below-boards",
            f"hardware {name} peaks at {measured:g} W by its power_w, but its {what}",
            ("hardware", name, "power_w"),
            severity="warning",
            hint="power_w is the whole node's measured peak in W; suppress with a reason when "
            "the boards are power-capped below their maximum",
        )


class _Budget(NamedTuple):
    key: str  # the rack's setting
    watts: float | None
    what: str
    code: str  # the finding when the rack's peak draw is over it


def _rack_findings(rack: RackPower, limits: dict[str, float]) -> Iterator[Finding]:
    path: tuple[Any, ...] = ("racks", rack.rack)
    no_budget = rack.power_budget_w is None and rack.cooling_budget_w is None
    if rack.unknown and not no_budget:
        yield Finding(
            "power-unknown",
            f"rack {rack.rack}: the draw of {', '.join(rack.unknown)} is not known (the catalog "
            "has no board power for its accelerators), so the rack's total leaves it out",
            path,
            severity="warning",
            hint="set hardware.<profile>.power_w to the node's measured peak draw",
        )
    budgets = (
        _Budget("power", rack.power_budget_w, "power budget", code="rack-power"),
        _Budget("cooling", rack.cooling_budget_w, "cooling budget", code="rack-cooling"),
    )
    over = False
    for limit in budgets:
        key, budget, what = limit.key, limit.watts, limit.what
        if budget is None or budget <= 0:
            continue
        if rack.peak_w > budget:
            over = True
            yield Finding(limit.code, _over(rack, budget, what), (*path, key), hint=_MOVE)
        elif rack.peak_w > budget * limits["warn_utilization_pct"] / 100:
            pct = 100 * rack.peak_w / budget
            yield Finding(
                "rack-utilization",
                f"rack {rack.rack}: {kw(rack.peak_w)} at full load is {pct:.0f} % of its "
                f"{kw(budget)} {what}, past the "
                f"{limits['warn_utilization_pct']:g} % threshold; {_consumers(rack)}",
                (*path, key),
                severity="warning",
                hint="leave headroom for inrush and growth, or set power.warn_utilization_pct",
            )
    yield from _air(rack, limits["air_cooling_max_kw"], path)
    if not over and no_budget and rack.peak_w > DENSEST_RACK_KW * 1000:
        yield Finding(
            "rack-density",
            f"{_draw(rack)}, more than the densest liquid-cooled racks built today carry "
            f"(about {DENSEST_RACK_KW:g} kW); {_consumers(rack)}",
            path,
            severity="warning",
            hint="spread the nodes over more racks, or give the rack its power and cooling "
            "budget (racks.<rack>.power, racks.<rack>.cooling)",
        )


def _air(rack: RackPower, ceiling_kw: float, path: tuple[Any, ...]) -> Iterator[Finding]:
    if rack.cooling_kind != "air":
        return
    heat = max(rack.peak_w, rack.cooling_budget_w or 0.0)
    if heat > ceiling_kw * 1000:
        carried = "is budgeted for" if heat > rack.peak_w else "draws"
        yield Finding(
            "air-cooling-limit",
            f"rack {rack.rack} is air-cooled and {carried} {kw(heat)}; air carries about "
            f"{ceiling_kw:g} kW from a rack",
            (*path, "cooling", "kind"),
            severity="warning",
            hint="use liquid cooling (rear-door or direct-to-chip) for the rack, spread its "
            "nodes, or set power.air_cooling_max_kw to what the room is rated for",
        )


def _draw(rack: RackPower) -> str:
    return f"rack {rack.rack} draws {kw(rack.peak_w)} at full load ({kw(rack.typical_w)} typical)"


def _over(rack: RackPower, budget: float, what: str) -> str:
    return f"{_draw(rack)}, over its {kw(budget)} {what}; {_consumers(rack)}"


def _consumers(rack: RackPower) -> str:
    parts = [f"{c.nodes} x {c.group} ({kw(c.each_w)} each)" for c in rack.largest()]
    more = len(rack.consumers) - len(parts)
    return "largest: " + ", ".join(parts) + (f" and {more} more group(s)" if more > 0 else "")
