"""The action of `cluster_plan.cluster.k8s_cordon` (its documentation: plugins/modules):
cordon a Kubernetes node for an owner, recording the owner on the node, or uncordon it when
the cordon is that owner's. It runs on the controller, where the cluster_plan package is (the
inventory plugin needs it too), and sends each kubectl command to the task's host (its
delegate_to: a control plane); what to do is decided by cluster_plan.kubernetes.cordon, the
one implementation `cluster-plan change` uses as well. Evicting the pods is the caller's
next task (`kubectl drain`)."""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase

from cluster_plan.ansible.node_hold import on_host, task_result
from cluster_plan.kubernetes import cordon

ARGUMENTS: dict[str, Any] = {
    "node": {"type": "str", "required": True},
    "owner": {"type": "str", "required": True},
    "reason": {"type": "str", "default": ""},
    "state": {"type": "str", "default": "cordoned", "choices": ["cordoned", "uncordoned"]},
    "kubeconfig": {"type": "str", "default": "/etc/kubernetes/admin.conf"},
}


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
        return task_result(result, node, decision, frozenset(("cordon", "uncordon")))
