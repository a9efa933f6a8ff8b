"""The power model: what each node draws and what each rack may carry (docs/capacity.md).

Pure functions of the plan (defaults filled) and its placed nodes. A node's peak draw is its
accelerators' board power from the catalog plus a server overhead (CPUs, fans, NICs, disks,
NVSwitches), or the profile's measured `power_w`. Typical draw is a fixed share of peak. A
rack's budget is the smaller of what its feeds deliver and what its cooling removes.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cluster_plan.plan.catalog import load_catalog
from cluster_plan.plan.nodes import Node

# Server overhead defaults, per class of server. Calibrated on NVIDIA's published system maxima:
# DGX H100 10.2 kW for 8 x 700 W boards (overhead 4.6 kW), DGX B200 14.3 kW for 8 x 1000 W
# (6.3 kW): 600 W plus 70 % of the boards' power gives 10.1 and 14.2 kW. PCIe servers carry no
# NVSwitch and fewer NICs per GPU: 600 W plus 25 % (an estimate, not a published figure). A
# CPU-only server: 600 W (two sockets, fans, disks; an estimate). Set power_w for real figures.
BASE_OVERHEAD_W = 600
OVERHEAD_SHARE = {"nvlink": 0.70, "pcie": 0.25}
# DGX H100: 10.2 kW max, 6.5-8.5 kW typical under training (64-83 %): 75 % is the middle.
TYPICAL_LOAD_PCT = 75
WARN_UTILIZATION_PCT = 80  # as NetBox's power feed max_utilization default
AIR_COOLING_MAX_KW = 30.0  # the air-cooled rack's practical ceiling (docs/capacity.md)
DENSEST_RACK_KW = 142.0  # GB300 NVL72 at peak, liquid-cooled: no rack built today carries more


@dataclass(frozen=True)
class NodePower:
    peak_w: float
    accelerator_w: float  # the boards' share of peak (0 when power_w is measured or unknown)
    measured: bool  # power_w from the plan
    known: bool  # False when an accelerator's board power is unknown and power_w is not set


@dataclass
class Consumer:
    """One node group's nodes in one rack."""

    group: str
    hardware: str
    nodes: int
    each_w: float

    @property
    def peak_w(self) -> float:
        return self.nodes * self.each_w


@dataclass
class RackPower:
    rack: str
    peak_w: float = 0.0
    typical_w: float = 0.0
    nodes: int = 0
    power_budget_w: float | None = None
    cooling_budget_w: float | None = None
    cooling_kind: str | None = None
    consumers: list[Consumer] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # profiles whose draw is not known

    def largest(self, n: int = 3) -> list[Consumer]:
        return sorted(self.consumers, key=lambda c: (-c.peak_w, c.group))[:n]


def settings(plan: dict[str, Any]) -> dict[str, float]:
    """The plan's `power` section, with this module's defaults where it says nothing."""
    section = plan.get("power") or {}
    return {
        "typical_load_pct": float(section.get("typical_load_pct", TYPICAL_LOAD_PCT)),
        "warn_utilization_pct": float(section.get("warn_utilization_pct", WARN_UTILIZATION_PCT)),
        "air_cooling_max_kw": float(section.get("air_cooling_max_kw", AIR_COOLING_MAX_KW)),
    }


def node_power(profile: dict[str, Any]) -> NodePower:
    """Peak draw of one node of a hardware profile."""
    accel = profile.get("accelerators")
    entry = load_catalog().get(accel["model"], {}) if accel else {}
    board = entry.get("board_power_w")
    boards_w = float(board * accel["count"]) if accel and board else 0.0
    if profile.get("power_w") is not None:
        return NodePower(float(profile["power_w"]), 0.0, True, True)
    if accel and not board:
        return NodePower(float(BASE_OVERHEAD_W), 0.0, False, False)
    overhead = profile.get("overhead_w")
    if overhead is None:
        share = OVERHEAD_SHARE.get(str(entry.get("interconnect")), 0.0)
        overhead = BASE_OVERHEAD_W + share * boards_w
    return NodePower(boards_w + float(overhead), boards_w, False, True)


def feed_watts(feed: dict[str, Any]) -> float:
    """What one feed may deliver: volts x amps (x sqrt(3) three-phase) x its utilisation limit,
    NetBox's PowerFeed.available_power."""
    phases = math.sqrt(3) if feed.get("phases", 1) == 3 else 1.0
    limit = feed.get("max_utilization_pct", 80) / 100
    return float(feed["volts"]) * float(feed["amps"]) * phases * limit * feed.get("count", 1)


def power_budget_w(rack: dict[str, Any]) -> float | None:
    power = rack.get("power") or {}
    if power.get("kw") is not None:
        return float(power["kw"]) * 1000
    feeds = power.get("feeds")
    if feeds:
        return sum(feed_watts(f) for f in feeds)
    return None


def rack_power(plan: dict[str, Any], nodes: Sequence[Node]) -> dict[str, RackPower]:
    """Every declared rack (and every rack a node stands in), with its draw and budgets."""
    typical = settings(plan)["typical_load_pct"] / 100
    declared = plan.get("racks") or {}
    racks = {name: _budgets(name, spec or {}) for name, spec in declared.items()}
    per: dict[tuple[str, str], int] = defaultdict(int)
    for node in nodes:
        if node.rack:
            per[(node.rack, node.group)] += 1
    hardware_of = {n.group: n.hardware for n in nodes}
    for (rack, group), count in per.items():
        entry = racks.setdefault(rack, RackPower(rack))
        hardware = hardware_of[group]
        profile = plan["hardware"].get(hardware) or {}
        draw = node_power(profile)
        entry.consumers.append(Consumer(group, hardware, count, draw.peak_w))
        entry.nodes += count
        entry.peak_w += count * draw.peak_w
        entry.typical_w += count * draw.peak_w * typical
        if not draw.known and hardware not in entry.unknown:
            entry.unknown.append(hardware)
    return racks


def _budgets(name: str, spec: dict[str, Any]) -> RackPower:
    cooling = spec.get("cooling") or {}
    kw = cooling.get("kw")
    return RackPower(
        name,
        power_budget_w=power_budget_w(spec),
        cooling_budget_w=None if kw is None else float(kw) * 1000,
        cooling_kind=cooling.get("kind"),
    )


def kw(watts: float) -> str:
    """Watts as kW for people: 10.1 kW, 325 kW."""
    value = watts / 1000
    return f"{value:,.1f} kW" if value < 100 else f"{value:,.0f} kW"
