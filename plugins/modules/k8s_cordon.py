#!/usr/bin/python
"""Cordon a Kubernetes node for an owner, recording the owner on the node, and evict its pods
when asked, or uncordon it when the cordon is that owner's (the work is done by the action
plugin of the same name, on the controller)."""

from __future__ import annotations

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: k8s_cordon
short_description: Cordon (and drain) a Kubernetes node, recording who cordoned it, or uncordon it
description:
  - >-
    With I(state=cordoned), records the owner in the node's annotation
    C(cluster-plan.io/cordoned-by) (C(cluster-plan:OWNER: REASON)) and cordons the node. A
    node that is already cordoned by anyone else (an operator, without the annotation, or
    another owner) is left as it is, its annotation kept, and reported (C(held_by)). Pods are
    not evicted.
  - >-
    With I(state=drained), cordons as I(state=cordoned) does (a node held by anyone else keeps
    their cordon), then moves the node's pods off through C(cluster_plan.kubernetes.drain),
    the drain C(cluster-plan change) uses: C(kubectl drain) within I(timeout) seconds, each
    pod evicted through the Eviction API (PodDisruptionBudgets respected, never C(--force));
    DaemonSets' and mirror pods stay. A pod a budget holds past I(timeout), or a pod that
    declares no controller (refused before anything is evicted), fails the task with the
    pods named, each with the budgets that hold it; the node stays cordoned. In check mode
    the pods are read and reported (C(pods)), none moved.
  - >-
    With I(state=uncordoned), uncordons the node and removes the annotation only when the
    annotation names I(owner); a node cordoned by anyone else stays cordoned and is reported.
  - >-
    Each side is one C(kubectl patch) of the annotation and the cordon together, carrying the
    node's resourceVersion as read: a node changed in between (an operator's cordon) is
    refused with a Conflict, read and decided again, three times at most, then the task fails.
  - >-
    Runs C(kubectl) on the task's host (delegate it to a control plane). The decisions are
    those of the Python package's C(cluster_plan.kubernetes.cordon), which the controller must
    have (as the inventory plugin does). Supports check mode.
options:
  node: {description: The node's name in Kubernetes., type: str, required: true}
  owner:
    description: Who cordons (lower-case letters, digits, _ and -), e.g. the role's name.
    type: str
    required: true
  reason: {description: Why, after the owner's tag., type: str, default: ""}
  state:
    description: cordoned, drained (cordoned and its pods evicted) or uncordoned.
    type: str
    default: cordoned
    choices: [cordoned, drained, uncordoned]
  timeout:
    description: >-
      With I(state=drained), the seconds the pods have to leave (kubectl drain's
      C(--timeout) and C(--request-timeout)).
    type: int
    default: 600
  kubeconfig:
    description: The kubeconfig kubectl uses on the task's host.
    type: str
    default: /etc/kubernetes/admin.conf
"""

RETURN = r"""
action: {description: cordon, uncordon or none., type: str, returned: always}
held_by:
  description: >-
    Who holds the node cordoned when it is not the owner (its annotation, or "cordoned, no
    owner recorded"), or null.
  type: str
  returned: always
pods:
  description: >-
    With I(state=drained), what the drain did, one line each (the pods evicted, their emptyDir
    data deleted, the pods left: DaemonSets', mirror pods); in check mode the pods it would
    evict.
  type: list
  elements: str
  returned: when state is drained
"""

ARGUMENT_SPEC = {
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


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.fail_json(
        msg="k8s_cordon runs as an action plugin on the controller: call it as "
        "cluster_plan.cluster.k8s_cordon from a play"
    )


if __name__ == "__main__":
    main()
