"""Hardware profiles: accelerators from the catalog and driver pins that fit them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cluster_plan.catalog import load_catalog
from cluster_plan.checks.base import Plan
from cluster_plan.findings import Finding
from cluster_plan.nodes import Node


def check_accelerators(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    catalog = load_catalog()
    in_use = {n.hardware for n in nodes}
    for name, profile in plan["hardware"].items():
        accel = profile.get("accelerators")
        if not accel or accel["model"] not in catalog:
            continue
        entry = catalog[accel["model"]]
        path = ("hardware", name, "accelerators")
        if entry["vendor"] != "nvidia" and name in in_use:
            yield Finding(
                "driver-not-managed",
                f"{accel['model']} accelerators are scheduled, but their driver is not installed "
                "by this project",
                (*path, "model"),
                severity="warning",
                hint="install it yourself, or suppress with a reason",
            )
        if accel.get("driver_branch") is not None:
            yield from _driver_pin(accel, entry, (*path, "driver_branch"))


def _driver_pin(
    accel: dict[str, Any], entry: dict[str, Any], path: tuple[Any, ...]
) -> Iterator[Finding]:
    pin = accel["driver_branch"]
    low, high = entry.get("min_driver_branch"), entry.get("max_driver_branch")
    if entry["vendor"] != "nvidia":
        yield Finding("driver-pin", f"{accel['model']} has no NVIDIA driver to pin", path)
    elif low and pin < low:
        yield Finding(
            "driver-pin",
            f"driver branch {pin} is too old for {accel['model']}, which needs {low} or newer",
            path,
        )
    elif high and pin > high:
        yield Finding(
            "driver-pin",
            f"driver branch {pin} no longer supports {accel['model']} (last: {high})",
            path,
        )
