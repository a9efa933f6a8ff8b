#!/usr/bin/python
"""Cordon a Kubernetes node for an owner, recording the owner on the node, or uncordon it when
the cordon is that owner's (the work is done by the action plugin of the same name, on the
controller)."""

from __future__ import annotations

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: k8s_cordon
short_description: Cordon a Kubernetes node, recording who cordoned it, or uncordon it
description:
  - >-
    With I(state=cordoned), records the owner in the node's annotation
    C(cluster-plan.io/cordoned-by) (C(cluster-plan:OWNER: REASON)) and cordons the node. A
    node that is already cordoned by anyone else (an operator, without the annotation, or
    another owner) is left as it is, its annotation kept, and reported (C(held_by)). Pods are
    not evicted: run C(kubectl drain) after it.
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
    description: cordoned or uncordoned.
    type: str
    default: cordoned
    choices: [cordoned, uncordoned]
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
"""

ARGUMENT_SPEC = {
    "node": {"type": "str", "required": True},
    "owner": {"type": "str", "required": True},
    "reason": {"type": "str", "default": ""},
    "state": {"type": "str", "default": "cordoned", "choices": ["cordoned", "uncordoned"]},
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
