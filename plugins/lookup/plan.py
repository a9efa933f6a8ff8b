"""Lookup plugin: the data of a cluster plan, for the inventory plugin's variables."""

from __future__ import annotations

DOCUMENTATION = r"""
name: plan
short_description: The expanded cluster plan, or one host of it
description:
  - The inventory plugin C(cluster_plan) gives every host C(plan_host) and the group C(all)
    C(cluster_plan) as templates over this lookup, so that the inventory itself stays small
    (a few bytes per host) and the data is read once per Ansible process.
  - C(cluster) returns the expanded plan without its hosts and groups; C(host NAME) returns
    one host's expanded data.
  - The plan is the one the inventory was read from (the variable C(cluster_plan_file)).
options:
  _terms:
    description: C(cluster), or C(host) followed by a host name.
    required: true
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: The data of another host
  ansible.builtin.debug:
    msg: "{{ query('cluster_plan.cluster.plan', 'host', 'gpu01') | first }}"
"""

RETURN = r"""
_raw:
  description: One item, the data asked for.
  type: list
  elements: dict
"""

from typing import Any

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase


class LookupModule(LookupBase):
    def run(self, terms: list[Any], variables: dict[str, Any] | None = None,
            **kwargs: Any) -> list[Any]:  # fmt: skip
        from cluster_plan.ansible.inventory_store import cluster_data, host_data

        plan_file = (variables or {}).get("cluster_plan_file")
        if not plan_file:
            raise AnsibleLookupError("cluster_plan_file is not set: is the inventory a plan?")
        plan_file = str(plan_file)
        try:
            if list(terms) == ["cluster"]:
                return [cluster_data(plan_file)]
            if len(terms) == 2 and terms[0] == "host":
                return [host_data(plan_file, str(terms[1]))]
        except KeyError as exc:
            raise AnsibleLookupError(f"no host {exc} in the plan {plan_file}") from None
        except Exception as exc:  # the plan changed under the run and no longer loads
            raise AnsibleLookupError(f"cannot read the plan {plan_file}: {exc}") from None
        raise AnsibleLookupError(f"ask for 'cluster' or 'host NAME', not {terms!r}")
