#!/usr/bin/python
"""Drain a Slurm node for an owner, or resume it when the drain is that owner's (the work is
done by the action plugin of the same name, on the controller)."""

from __future__ import annotations

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: slurm_drain
short_description: Drain a Slurm node and wait for its jobs, or resume it, recording who drained it
description:
  - >-
    With I(state=drained), drains the node with the reason C(cluster-plan:OWNER: REASON) and
    waits (at most I(timeout) seconds) until no job runs on it. A node that is already drained,
    draining or failed for anyone else's reason is left as it is, its reason kept, and
    reported (C(held_by)); the jobs on it are still waited for. A node that is only down (not
    answering) is drained.
  - >-
    With I(state=resumed), resumes the node only when its current drain is I(owner)'s; a node
    drained by anyone else stays drained and is reported.
  - >-
    Runs C(scontrol) and C(squeue) on the task's host (delegate it to a Slurm controller). The
    decisions are those of the Python package's C(cluster_plan.slurm.drain), which the
    controller must have (as the inventory plugin does). Supports check mode.
options:
  node: {description: The node's name in Slurm., type: str, required: true}
  owner:
    description: Who drains (lower-case letters, digits, _ and -), e.g. the role's name.
    type: str
    required: true
  reason: {description: Why, after the owner's tag., type: str, default: ""}
  state:
    description: drained or resumed.
    type: str
    default: drained
    choices: [drained, resumed]
  wait:
    description: With state=drained, wait for the node's jobs to end.
    type: bool
    default: true
  timeout:
    description: Seconds to wait for the jobs; then the task fails naming them.
    type: int
    default: 3600
  requeue:
    description: Requeue the jobs still on the node instead of waiting for them to end.
    type: bool
    default: false
  poll: {description: Seconds between two looks at the node's jobs., type: float, default: 10}
"""

RETURN = r"""
action: {description: drain, resume or none., type: str, returned: always}
held_by:
  description: The reason of a drain that is not the owner's (left as it is), or null.
  type: str
  returned: always
"""

ARGUMENT_SPEC = {
    "node": {"type": "str", "required": True},
    "owner": {"type": "str", "required": True},
    "reason": {"type": "str", "default": ""},
    "state": {"type": "str", "default": "drained", "choices": ["drained", "resumed"]},
    "wait": {"type": "bool", "default": True},
    "timeout": {"type": "int", "default": 3600},
    "requeue": {"type": "bool", "default": False},
    "poll": {"type": "float", "default": 10.0},
}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.fail_json(
        msg="slurm_drain runs as an action plugin on the controller: call it as "
        "cluster_plan.cluster.slurm_drain from a play"
    )


if __name__ == "__main__":
    main()
