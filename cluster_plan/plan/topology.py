"""The network tree: core -> aggregation -> access, and which switch serves each rack."""

from __future__ import annotations

from typing import Any


def normalize(topology: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """Core given as a list becomes a mapping; each access switch gets a ``racks`` list."""
    core = topology.get("core", {})
    if isinstance(core, list):
        core = {name: {} for name in core}
    access = {}
    for name, switch in topology.get("access", {}).items():
        switch = dict(switch)
        racks = list(switch.pop("racks", []))
        if "rack" in switch:
            racks.insert(0, switch.pop("rack"))
        switch["racks"] = racks
        access[name] = switch
    return {
        "core": {name: dict(v or {}) for name, v in core.items()},
        "aggregation": {name: dict(v) for name, v in topology.get("aggregation", {}).items()},
        "access": access,
    }


def rack_switches(topology: dict[str, dict[str, dict[str, Any]]]) -> dict[str, list[str]]:
    """Rack -> the access switches that serve it (a sound plan has exactly one)."""
    served: dict[str, list[str]] = {}
    for name, switch in topology["access"].items():
        for rack in switch["racks"]:
            served.setdefault(rack, []).append(name)
    return served


def switch_path(topology: dict[str, dict[str, dict[str, Any]]], access: str) -> dict[str, Any]:
    agg = topology["access"][access]["uplink"]
    cores = list(topology["aggregation"].get(agg, {}).get("uplinks", []))
    return {"access_switch": access, "aggregation_switch": agg, "core_switches": cores}
