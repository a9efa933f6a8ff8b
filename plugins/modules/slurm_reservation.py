#!/usr/bin/python
"""Create or update a Slurm reservation so that it matches the plan (idempotent, check mode)."""

from __future__ import annotations

import re
from typing import Any

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: slurm_reservation
short_description: Keep a Slurm reservation as the cluster plan describes it
description:
  - Reads the reservation with C(scontrol show reservation), creates it when missing and
    updates the fields that differ. Supports check mode.
options:
  name: {description: Reservation name., type: str, required: true}
  start: {description: Start time (YYYY-MM-DDTHH:MM:SS)., type: str, required: true}
  duration_minutes: {description: Length in minutes., type: int, required: true}
  nodes: {description: Node names., type: list, elements: str, required: true}
  flags:
    description: Reservation flags (maint, ignore_jobs, ...).
    type: list
    elements: str
    default: []
  users: {description: Users allowed to run in it., type: list, elements: str, default: [root]}
  accounts:
    description: Accounts allowed to run in it (needs Slurm accounting).
    type: list
    elements: str
    default: []
  state: {description: present or absent., type: str, default: present, choices: [present, absent]}
"""


def parse_show(text: str) -> dict[str, str]:
    """`scontrol -o show reservation NAME` -> {"ReservationName": .., "Nodes": .., ...}."""
    fields: dict[str, str] = {}
    for key, value in re.findall(r"(\w+)=(\S*)", text):
        fields[key] = value
    return fields


def expand_hostlist(text: str) -> list[str]:
    """Enough of Slurm's hostlist syntax for what scontrol prints: a[01-03,05],b1."""
    names: list[str] = []
    for prefix, ranges, plain in re.findall(r"([^,\[]+)\[([^\]]+)\]|([^,]+)", text):
        if plain:
            names.append(plain)
            continue
        for part in ranges.split(","):
            low, _, high = part.partition("-")
            for n in range(int(low), int(high or low) + 1):
                names.append(f"{prefix}{n:0{len(low)}d}")
    return names


def wanted_fields(params: dict[str, Any]) -> dict[str, str]:
    return {
        "StartTime": params["start"],
        "Duration": str(params["duration_minutes"]),
        "Nodes": ",".join(params["nodes"]),
        "Flags": ",".join(f.upper() for f in params["flags"]),
        "Users": ",".join(params["users"]),
        "Accounts": ",".join(params["accounts"]),
    }


def differences(current: dict[str, str], wanted: dict[str, str]) -> dict[str, str]:
    diff = {}
    if current.get("StartTime") != wanted["StartTime"]:
        diff["StartTime"] = wanted["StartTime"]
    if _minutes(current.get("Duration", "")) != int(wanted["Duration"]):
        diff["Duration"] = wanted["Duration"]
    if sorted(expand_hostlist(current.get("Nodes", ""))) != sorted(wanted["Nodes"].split(",")):
        diff["Nodes"] = wanted["Nodes"]
    have_flags = set(filter(None, current.get("Flags", "").split(",")))
    if not set(filter(None, wanted["Flags"].split(","))) <= have_flags:
        diff["Flags"] = wanted["Flags"]
    for key in ("Users", "Accounts"):
        shown = current.get(key, "")
        have = sorted(filter(None, "" if shown == "(null)" else shown.split(",")))
        if have != sorted(filter(None, wanted[key].split(","))):
            diff[key] = wanted[key]
    return diff


def _minutes(duration: str) -> int:
    """scontrol prints [days-]hours:minutes:seconds."""
    days = 0
    if "-" in duration:
        day_text, duration = duration.split("-", 1)
        days = int(day_text)
    parts = [int(p) for p in duration.split(":") if p.isdigit()]
    while len(parts) < 3:
        parts.insert(0, 0)
    hours, minutes, _ = parts[-3:]
    return days * 1440 + hours * 60 + minutes


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "required": True},
            "start": {"type": "str", "required": True},
            "duration_minutes": {"type": "int", "required": True},
            "nodes": {"type": "list", "elements": "str", "required": True},
            "flags": {"type": "list", "elements": "str", "default": []},
            "users": {"type": "list", "elements": "str", "default": ["root"]},
            "accounts": {"type": "list", "elements": "str", "default": []},
            "state": {"type": "str", "default": "present", "choices": ["present", "absent"]},
        },
        supports_check_mode=True,
    )
    params = module.params
    scontrol = module.get_bin_path("scontrol", required=True)
    rc, out, err = module.run_command([scontrol, "-o", "show", "reservation", params["name"]])
    exists = rc == 0 and "ReservationName=" in out
    if rc != 0 and "not found" not in (out + err).lower():
        module.fail_json(msg=f"scontrol show reservation failed: {err.strip()}")

    if params["state"] == "absent":
        if exists and not module.check_mode:
            _run(module, [scontrol, "delete", f"ReservationName={params['name']}"])
        module.exit_json(changed=exists)
    _present(module, scontrol, out if exists else None)


def _present(module: AnsibleModule, scontrol: str, shown: str | None) -> None:
    """Create the reservation (`shown` None: Slurm has none by that name) or update the
    fields that differ from the plan's."""
    params = module.params
    wanted = wanted_fields(params)
    name = f"ReservationName={params['name']}"
    if shown is None:
        if not module.check_mode:
            fields = (f"{k}={v}" for k, v in wanted.items() if v)
            _run(module, [scontrol, "create", "reservation", name, *fields])
        module.exit_json(changed=True, action="create", fields=wanted)
    diff = differences(parse_show(shown or ""), wanted)
    if diff and not module.check_mode:
        _run(module, [scontrol, "update", name, *(f"{k}={v}" for k, v in diff.items() if v)])
    module.exit_json(changed=bool(diff), action="update" if diff else "none", fields=diff)


def _run(module: AnsibleModule, argv: list[str]) -> None:
    rc, out, err = module.run_command(argv)
    if rc != 0:
        module.fail_json(msg=f"{' '.join(argv)} failed: {(err or out).strip()}")


if __name__ == "__main__":
    main()
