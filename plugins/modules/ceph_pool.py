#!/usr/bin/python
"""Keep a replicated Ceph pool as the plan describes it (idempotent, check mode)."""

from __future__ import annotations

from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.cluster_plan.cluster.plugins.module_utils.ceph_cli import CephError, ceph

DOCUMENTATION = r"""
module: ceph_pool
short_description: Create a replicated pool or bring its settings to the plan's
description:
  - Reads C(ceph osd pool ls detail). Creates the pool when missing; sets size, min_size,
    CRUSH rule and autoscale mode when they differ; keeps pg_num at the plan's value only
    while autoscaling is off (otherwise Ceph owns it); enables the application.
  - Never deletes a pool or removes an application. Supports check mode.
options:
  name: {description: Pool name., type: str, required: true}
  size: {description: Replicas., type: int, required: true}
  min_size: {description: Replicas needed for I/O., type: int, required: true}
  pg_num:
    description: Placement groups at creation (and while autoscale is off).
    type: int
    required: true
  autoscale:
    description: PG autoscaler mode.
    type: str
    choices: ["on", "warn", "off"]
    required: true
  application: {description: Application to enable (rbd, cephfs, rgw)., type: str, required: true}
  rule: {description: CRUSH rule name., type: str, required: true}
"""


def planned_changes(
    pool: dict[str, Any] | None, want: dict[str, Any], rule_id: int
) -> list[list[str]]:
    """The `ceph osd pool ...` commands (argument lists) that bring `pool` to `want`."""
    name = want["name"]
    if pool is None:
        return [
            [
                "osd", "pool", "create", name, str(want["pg_num"]), str(want["pg_num"]),
                "replicated", want["rule"], f"--autoscale-mode={want['autoscale']}",
            ],
            ["osd", "pool", "set", name, "size", str(want["size"])],
            ["osd", "pool", "set", name, "min_size", str(want["min_size"])],
            ["osd", "pool", "application", "enable", name, want["application"]],
        ]  # fmt: skip
    steps: list[list[str]] = []
    size_first = want["size"] >= int(pool["size"])
    sizes = [("size", want["size"]), ("min_size", want["min_size"])]
    for key, value in sizes if size_first else reversed(sizes):
        if int(pool[key]) != value:
            steps.append(["osd", "pool", "set", name, key, str(value)])
    if int(pool["crush_rule"]) != rule_id:
        steps.append(["osd", "pool", "set", name, "crush_rule", want["rule"]])
    if pool.get("pg_autoscale_mode") != want["autoscale"]:
        steps.append(["osd", "pool", "set", name, "pg_autoscale_mode", want["autoscale"]])
    current_pgs = int(pool.get("pg_num_target", pool["pg_num"]))
    if want["autoscale"] == "off" and current_pgs != want["pg_num"]:
        steps.append(["osd", "pool", "set", name, "pg_num", str(want["pg_num"])])
    if want["application"] not in (pool.get("application_metadata") or {}):
        steps.append(["osd", "pool", "application", "enable", name, want["application"]])
    return steps


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "required": True},
            "size": {"type": "int", "required": True},
            "min_size": {"type": "int", "required": True},
            "pg_num": {"type": "int", "required": True},
            "autoscale": {"type": "str", "required": True, "choices": ["on", "warn", "off"]},
            "application": {"type": "str", "required": True},
            "rule": {"type": "str", "required": True},
        },
        supports_check_mode=True,
    )
    want = module.params
    try:
        pools = {p["pool_name"]: p for p in ceph(module, "osd", "pool", "ls", "detail")}
        rules = {r["rule_name"]: r["rule_id"] for r in ceph(module, "osd", "crush", "rule", "dump")}
        if want["rule"] not in rules:
            module.fail_json(msg=f"pool {want['name']}: CRUSH rule {want['rule']} does not exist")
        steps = planned_changes(pools.get(want["name"]), want, rules[want["rule"]])
        if not module.check_mode:
            for step in steps:
                ceph(module, *step, as_json=False)
    except CephError as err:
        module.fail_json(msg=f"pool {want['name']}: {err}")
    module.exit_json(changed=bool(steps), commands=[" ".join(s) for s in steps])


if __name__ == "__main__":
    main()
