"""Hardware profiles: accelerators from the catalog and driver pins that fit them; disks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cluster_plan.plan.catalog import load_catalog
from cluster_plan.plan.checks.base import Plan
from cluster_plan.plan.findings import Finding
from cluster_plan.plan.nodes import Node


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
        if accel.get("nvswitch") and not entry.get("nvswitch_boards"):
            yield Finding(
                "nvswitch",
                f"{accel['model']} is never built on an NVSwitch board: there is no fabric for "
                "the fabric manager to manage",
                (*path, "nvswitch"),
                hint="remove nvswitch: true (NVSwitch boards carry SXM models, e.g. "
                "H100-SXM5-80GB)",
            )


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


def check_disks(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    """Disk names (and device paths) are unique on a host: roles find a disk by its name, and
    two entries for one device would partition it twice."""
    for name, profile in plan["hardware"].items():
        yield from _unique_disks(profile.get("disks") or [], [], ("hardware", name))
    for group_name, group in plan["node_groups"].items():
        profile = plan["hardware"].get(group["hardware"])
        base = (profile or {}).get("disks") or [] if isinstance(profile, dict) else []
        for host, override in (group.get("nodes") or {}).items():
            extra = (override or {}).get("disks") or []
            if extra:
                where = ("node_groups", group_name, "nodes", host)
                yield from _unique_disks(extra, base, where, profile_name=group["hardware"])


def _unique_disks(
    disks: list[dict[str, Any]],
    inherited: list[dict[str, Any]],
    path: tuple[Any, ...],
    profile_name: str | None = None,
) -> Iterator[Finding]:
    for key, what in (("name", "name"), ("device", "device")):
        seen: dict[Any, int | None] = {
            d[key]: None for d in inherited if isinstance(d, dict) and d.get(key)
        }
        for i, disk in enumerate(disks):
            value = disk.get(key) if isinstance(disk, dict) else None
            if value is None:
                continue
            if value in seen:
                first = (
                    f"profile {profile_name}'s disks"
                    if seen[value] is None
                    else f"disks[{seen[value]}]"
                )
                yield Finding(
                    "duplicate-disk",
                    f"disk {what} {value!r} is used twice: here and in {first}",
                    (*path, "disks", i, key),
                    hint="an extra disk of a node adds to its profile's disks; give it another "
                    + what
                    if profile_name
                    else f"give each disk of a profile its own {what}",
                )
            else:
                seen[value] = i
