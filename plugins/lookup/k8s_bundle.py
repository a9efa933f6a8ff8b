"""Lookup plugin: the offline Kubernetes bundle built on the controller, for the roles that
install from the plan's mirror."""

from __future__ import annotations

DOCUMENTATION = r"""
name: k8s_bundle
short_description: The offline Kubernetes bundle in the controller's cache
description:
  - Returns the manifest of the bundle for a Kubernetes version (C(cluster-plan k8s bundle),
    docs/kubernetes.md, "The offline bundle") as this controller's cache has it, with its
    C(directory) and its C(name) (the directory's name, C(<version>-<key>)).
  - It only reads; the k8s_mirror role builds the bundle (or verifies it) first. A bundle
    that is not built is an error naming the command that builds it.
  - With I(plan_file), the bundle of what that plan needs besides its release (the project's
    device plugin, the training image), the one C(cluster-plan k8s bundle PLAN) builds;
    without it, the release's alone.
options:
  _terms:
    description: The plan's C(scheduler.kubernetes.version) (C(1.36) or C(1.36.3)).
    required: true
    type: list
    elements: str
  plan_file:
    description: The plan file (the inventory's C(cluster_plan_file) variable).
    type: path
"""

EXAMPLES = r"""
- name: The bundle's kubelet
  ansible.builtin.debug:
    msg: "{{ (lookup('cluster_plan.cluster.k8s_bundle', '1.36',
                     plan_file=cluster_plan_file).artifacts
              | selectattr('name', 'equalto', 'kubelet') | first).sha256 }}"
"""

RETURN = r"""
_raw:
  description: One item, the manifest with C(directory) and C(name) added.
  type: list
  elements: dict
"""

from typing import Any

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase


class LookupModule(LookupBase):
    def run(self, terms: list[Any], variables: dict[str, Any] | None = None,
            **kwargs: Any) -> list[Any]:  # fmt: skip
        from cluster_plan.api import load_expanded
        from cluster_plan.kubernetes.bundle import built_bundle
        from cluster_plan.kubernetes.bundle.command import plan_needs
        from cluster_plan.kubernetes.cluster import kubernetes_plan
        from cluster_plan.kubernetes.versions import UnsupportedVersion
        from cluster_plan.plan.findings import PlanError

        if len(terms) != 1:
            raise AnsibleLookupError(f"give one Kubernetes version, not {terms!r}")
        version = str(terms[0])
        plan_file = kwargs.get("plan_file")
        try:
            needs = plan_needs(kubernetes_plan(load_expanded(plan_file))) if plan_file else None
            bundle = built_bundle(version, needs=needs)
        except (UnsupportedVersion, PlanError) as exc:
            raise AnsibleLookupError(str(exc)) from None
        if bundle is None:
            raise AnsibleLookupError(
                f"no offline bundle for Kubernetes {version} in this controller's cache: "
                "`cluster-plan k8s bundle PLAN` builds it (the k8s_mirror role runs it first)"
            )
        return [{**bundle.manifest, "directory": str(bundle.directory),
                 "name": bundle.directory.name}]  # fmt: skip
