"""The action of `cluster_plan.cluster.slurm_drain` (its documentation: plugins/modules):
drain a Slurm node for an owner and wait for its jobs, or resume it when the drain is that
owner's. It runs on the controller, where the cluster_plan package is (the inventory plugin
needs it too), and sends each scontrol and squeue command to the task's host (its
delegate_to: a Slurm controller); what to do is decided by cluster_plan.slurm.drain, the one
implementation `cluster-plan change` uses as well."""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase

from cluster_plan.ansible.node_hold import on_host, task_result
from cluster_plan.slurm import drain as slurm_drain

ARGUMENTS: dict[str, Any] = {
    "node": {"type": "str", "required": True},
    "owner": {"type": "str", "required": True},
    "reason": {"type": "str", "default": ""},
    "state": {"type": "str", "default": "drained", "choices": ["drained", "resumed"]},
    "wait": {"type": "bool", "default": True},
    "timeout": {"type": "int", "default": 3600},
    "requeue": {"type": "bool", "default": False},
    "poll": {"type": "float", "default": 10.0},
}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = True

    def run(self, tmp: Any = None, task_vars: Any = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        _, args = self.validate_argument_spec(argument_spec=ARGUMENTS)
        check = bool(self._task.check_mode)
        run = on_host(self._low_level_execute_command)

        node, owner = args["node"], args["owner"]
        try:
            if args["state"] == "resumed":
                decision = slurm_drain.resume(run, node, owner, check=check)
            else:
                decision = slurm_drain.drain(run, node, owner, args["reason"], check=check)
                if args["wait"] and not check:
                    slurm_drain.wait_for_jobs(
                        run, node, args["timeout"], requeue=args["requeue"], poll_s=args["poll"]
                    )
        except (slurm_drain.DrainError, ValueError) as exc:
            return {**result, "failed": True, "msg": str(exc), "node": node}
        return task_result(result, node, decision, frozenset(("drain", "resume")))
