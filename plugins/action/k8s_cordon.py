"""The action of `cluster_plan.cluster.k8s_cordon` (its documentation: plugins/modules):
cordon a Kubernetes node for an owner, recording the owner on the node, and with
`state: drained` move its pods off too, or uncordon it when the cordon is that owner's. It
runs on the controller, where the cluster_plan package is (the inventory plugin needs it
too), and sends each kubectl command to the task's host (its delegate_to: a control plane);
what to do is decided by cluster_plan.kubernetes.cordon and cluster_plan.kubernetes.drain,
the one cordon and the one drain `cluster-plan change` uses as well."""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase

from cluster_plan.ansible.node_hold import Run, on_host, task_result
from cluster_plan.kubernetes import cordon
from cluster_plan.kubernetes import drain as pod_drain

ARGUMENTS: dict[str, Any] = {
    "node": {"type": "str", "required": True},
    "owner": {"type": "str", "required": True},
    "reason": {"type": "str", "default": ""},
    "state": {
        "type": "str",
        "default": "cordoned",
        "choices": ["cordoned", "drained", "uncordoned"],
    },
    "timeout": {"type": "int", "default": 600},
    "kubeconfig": {"type": "str", "default": "/etc/kubernetes/admin.conf"},
}
CHANGING = frozenset(("cordon", "uncordon"))


def move_pods(
    result: dict[str, Any], run: Run, node: str, timeout_s: int, check: bool
) -> dict[str, Any]:
    """The cordoned node's pods evicted within `timeout_s`, never forced (a budget that
    allows no disruption, a pod no controller recreates, stop it, named in the failure);
    the node stays cordoned whatever happens. In check mode the pods are only read."""
    try:
        if check:
            leaving = pod_drain.to_move(run, node)
            moving = f"would evict {', '.join(leaving)}" if leaving else "no pod to move"
            result.update(changed=result["changed"] or bool(leaving), pods=[f"{node}: {moving}"])
            result["msg"] += f"; {node}: {moving} (check mode: none moved)"
            return result
        drained = pod_drain.drain(run, node, timeout_s, force=False)
    except pod_drain.DrainError as exc:
        return {**result, "failed": True, "msg": str(exc), "pods": []}
    result.update(
        changed=result["changed"] or bool(drained.moved),
        pods=drained.lines,
        msg="; ".join([result["msg"], *drained.lines]),
    )
    return result


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = True

    def run(self, tmp: Any = None, task_vars: Any = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        _, args = self.validate_argument_spec(argument_spec=ARGUMENTS)
        check = bool(self._task.check_mode)
        run = on_host(self._low_level_execute_command, {"KUBECONFIG": args["kubeconfig"]})

        node, owner = args["node"], args["owner"]
        try:
            if args["state"] == "uncordoned":
                decision = cordon.uncordon(run, node, owner, check=check)
            else:
                decision = cordon.cordon(run, node, owner, args["reason"], check=check)
        except (cordon.DrainError, ValueError) as exc:
            return {**result, "failed": True, "msg": str(exc), "node": node}
        result = task_result(result, node, decision, CHANGING)
        if args["state"] != "drained":
            return result
        return move_pods(result, run, node, args["timeout"], check)
