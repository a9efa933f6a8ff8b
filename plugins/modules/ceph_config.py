#!/usr/bin/python
"""Keep options in the monitors' configuration database at the plan's values."""

from __future__ import annotations

from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.cluster_plan.cluster.plugins.module_utils.ceph_cli import CephError, ceph

DOCUMENTATION = r"""
module: ceph_config
short_description: Set options in Ceph's configuration database (ceph config set)
description:
  - Compares C(ceph config dump) with the wanted options and sets those that differ.
    Options set by hand that the plan does not name are left alone. Supports check mode.
options:
  options:
    description: Options, each with who (global, mon, osd, ...), name and value.
    type: list
    elements: dict
    required: true
"""


def same_value(current: str | None, wanted: str) -> bool:
    """The dump prints a float option in its own form (`mds_tick_interval` 1 as `1.000000`):
    two numbers are the same value when they are equal as numbers."""
    if current is None or current == wanted:
        return current == wanted
    try:
        return float(current) == float(wanted)
    except ValueError:
        return False


def planned_changes(dump: list[dict[str, Any]], options: list[dict[str, Any]]) -> list[list[str]]:
    current = {(o["section"], o["name"]): str(o["value"]) for o in dump if not o.get("mask")}
    return [
        ["config", "set", o["who"], o["name"], str(o["value"])]
        for o in options
        if not same_value(current.get((o["who"], o["name"])), str(o["value"]))
    ]


def main() -> None:
    module = AnsibleModule(
        argument_spec={"options": {"type": "list", "elements": "dict", "required": True}},
        supports_check_mode=True,
    )
    try:
        steps = planned_changes(ceph(module, "config", "dump"), module.params["options"])
        if not module.check_mode:
            for step in steps:
                ceph(module, *step, as_json=False)
    except CephError as err:
        module.fail_json(msg=str(err))
    module.exit_json(changed=bool(steps), commands=[" ".join(s) for s in steps])


if __name__ == "__main__":
    main()
