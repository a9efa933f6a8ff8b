#!/usr/bin/python
"""Keep the CRUSH tree (racks, hosts) and replicated rules as the plan describes them."""

from __future__ import annotations

from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.cluster_plan.cluster.plugins.module_utils.ceph_cli import CephError, ceph

DOCUMENTATION = r"""
module: ceph_crush
short_description: Bring the CRUSH hierarchy and rules to the plan's
description:
  - Creates missing buckets (rows, racks, hosts) and moves each under its planned parent.
    Buckets the plan does not name are left where they are.
  - Creates missing replicated rules. A rule whose steps differ from the plan's is refused
    with a message (changing it moves data; rename or remove it first).
  - A rule that takes several racks gets a root of that name linking those racks.
  - Supports check mode.
options:
  buckets:
    description: Buckets, parents first, each with name, type and parent.
    type: list
    elements: dict
    required: true
  rules:
    description: Rules, each with name, take (bucket), type (failure domain) and racks.
    type: list
    elements: dict
    required: true
"""


class Tree:
    """The parts of `ceph osd crush dump` this module compares against."""

    def __init__(self, dump: dict[str, Any]) -> None:
        buckets = [b for b in dump["buckets"] if "~" not in b["name"]]  # skip class shadows
        self.type_of = {b["name"]: b["type_name"] for b in buckets}
        names = {b["id"]: b["name"] for b in buckets}
        self.children = {b["name"]: [names.get(i["id"]) for i in b["items"]] for b in buckets}
        self.rules = {r["rule_name"]: r["steps"] for r in dump["rules"]}

    def parents(self, name: str, skip: set[str]) -> list[str]:
        return [p for p, kids in self.children.items() if name in kids and p not in skip]


def rule_matches(steps: list[dict[str, Any]], take: str, kind: str) -> bool:
    ops = [s for s in steps if s["op"] != "emit"]
    return (
        len(ops) == 2
        and ops[0].get("item_name") == take
        and ops[1]["op"] in ("chooseleaf_firstn", "choose_firstn")
        and ops[1].get("type") == kind
    )


def planned_changes(
    tree: Tree, buckets: list[dict[str, Any]], rules: list[dict[str, Any]]
) -> list[list[str]]:
    links = {r["take"] for r in rules if len(r.get("racks") or []) > 1}
    steps: list[list[str]] = []
    type_of = dict(tree.type_of)
    for bucket in buckets:
        name, kind, parent = bucket["name"], bucket["type"], bucket["parent"]
        if name not in type_of:
            steps.append(["osd", "crush", "add-bucket", name, kind])
            type_of[name] = kind
            current: list[str] = []
        elif type_of[name] != kind:
            raise CephError(f"CRUSH bucket {name} is a {type_of[name]}, the plan makes it a {kind}")
        else:
            current = tree.parents(name, links)
        if current != [parent]:
            steps.append(["osd", "crush", "move", name, f"{type_of.get(parent, 'root')}={parent}"])
    for rule in rules:
        if rule["take"] in links:
            if rule["take"] not in type_of:
                steps.append(["osd", "crush", "add-bucket", rule["take"], "root"])
            for rack in rule["racks"]:
                if rack not in tree.children.get(rule["take"], []):
                    steps.append(["osd", "crush", "link", rack, f"root={rule['take']}"])
        if rule["name"] not in tree.rules:
            steps.append(
                [
                    "osd",
                    "crush",
                    "rule",
                    "create-replicated",
                    rule["name"],
                    rule["take"],
                    rule["type"],
                ]
            )
        elif not rule_matches(tree.rules[rule["name"]], rule["take"], rule["type"]):
            raise CephError(
                f"CRUSH rule {rule['name']} exists with other steps than the plan's "
                f"(take {rule['take']}, one replica per {rule['type']}); changing it moves "
                "data: rename or remove the old rule first"
            )
    return steps


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "buckets": {"type": "list", "elements": "dict", "required": True},
            "rules": {"type": "list", "elements": "dict", "required": True},
        },
        supports_check_mode=True,
    )
    try:
        tree = Tree(ceph(module, "osd", "crush", "dump"))
        steps = planned_changes(tree, module.params["buckets"], module.params["rules"])
        if not module.check_mode:
            for step in steps:
                ceph(module, *step, as_json=False)
    except CephError as err:
        module.fail_json(msg=str(err))
    module.exit_json(changed=bool(steps), commands=[" ".join(s) for s in steps])


if __name__ == "__main__":
    main()
