"""Ansible inventory plugin: the cluster plan file is the inventory source."""

from __future__ import annotations

DOCUMENTATION = r"""
name: cluster_plan
short_description: Hosts and groups from a cluster plan and its lock file
description:
  - Reads a cluster plan (a YAML file whose top-level C(plugin) key is C(cluster_plan)), checks it
    and its lock file (C(<plan>.lock.json) beside it), and adds every planned host with its
    locked addresses.
  - Each host gets C(ansible_host) (its management address) and C(plan_host), its expanded
    data; the group C(all) gets C(cluster_plan), the expanded cluster without the hosts, and
    C(ansible_user) and C(ansible_port) from the plan's C(access) section.
  - C(plan_host) and C(cluster_plan) are templates over the lookup C(cluster_plan.cluster.plan),
    so the inventory stays small at any size; C(ansible-inventory --list) shows the templates
    (C(cluster-plan expand) prints the data).
  - Groups come from the plan, by role (C(slurm_controller), C(ceph_osd), ...), rack
    (C(rack_r1)), access switch (C(access_tor1)), hardware profile (C(hw_gpu8)), node group
    (C(nodes_gpu)), scheduler pool (C(pool_gpu)) and GPU model (C(gpu_h100)).
  - A plan with errors, or a missing or stale lock, fails with every finding listed with its
    file, line and JSON path. Run C(cluster-plan lock PLAN) to refresh the lock.
  - The rest of the plan's keys (networks, topology, ...) are the plan itself; see
    schemas/cluster-plan.schema.json.
extends_documentation_fragment:
  - constructed
options:
  plugin:
    description: Marks this file as a cluster plan.
    required: true
    choices: [cluster_plan]
"""

EXAMPLES = r"""
# inventory/lab/cluster.yml is both the plan and the inventory source:
#   ansible-inventory -i inventory/lab/cluster.yml --graph
# Constructable options sit at the plan's top level:
plugin: cluster_plan
keyed_groups:
  - key: plan_host.accelerators.model | default('none')
    prefix: model
compose:
  slurm_weight: plan_host.cpu_cores
"""

import os
import sys
from typing import Any

from ansible.errors import AnsibleParserError
from ansible.plugins.inventory import BaseInventoryPlugin, Constructable

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _import_core() -> Any:
    """The project's core package, from the installed package or this checkout."""
    try:
        import cluster_plan.api as api
    except ImportError:
        sys.path.insert(0, _ROOT)
        import cluster_plan.api as api
    return api


CLUSTER_TEMPLATE = "{{ query('cluster_plan.cluster.plan', 'cluster') | first }}"
HOST_TEMPLATE = "{{ query('cluster_plan.cluster.plan', 'host', inventory_hostname) | first }}"


def _template(text: str) -> Any:
    """A template the inventory may hand to Ansible (ansible-core 2.19 trusts no string an
    inventory plugin sets unless told so)."""
    try:
        from ansible.template import trust_as_template
    except ImportError:  # before 2.19, inventory strings are templated as they are
        return text
    return trust_as_template(text)


# ansible.cfg runs the mitogen_linear strategy, whose ssh command line puts its own keepalive
# (30 s x 10) before ansible.cfg's ServerAliveInterval=15, and ssh keeps the first: a node
# lost mid-run would hold every host's play for five minutes. The same 15 s x 3 as Ansible's
# own ssh connection (unused under the linear strategy).
MITOGEN_KEEPALIVE = {"mitogen_ssh_keepalive_interval": 15, "mitogen_ssh_keepalive_count": 3}


class InventoryModule(BaseInventoryPlugin, Constructable):
    NAME = "cluster_plan"

    def verify_file(self, path: str) -> bool:
        if not super().verify_file(path) or not path.endswith((".yml", ".yaml")):
            return False
        if not os.path.isfile(path):  # a FIFO would block the read below for ever
            return False
        try:
            with open(path, "rb") as handle:
                head = handle.read(65536)
        except OSError:
            return False
        # Cheap and exact enough: the plan's own marker, so other YAML inventories pass by.
        return b"plugin: cluster_plan" in head

    def parse(self, inventory: Any, loader: Any, path: str, cache: bool = True) -> None:
        super().parse(inventory, loader, path, cache)
        api = _import_core()
        real = loader.get_real_file(path, decrypt=True)  # vault-encrypted plans work too
        try:
            with open(real, "rb") as handle:
                raw = handle.read()
        finally:
            loader.cleanup_tmp_file(real)
        try:
            expanded = api.load_expanded_text(raw, path)
        except api.PlanError as exc:
            raise AnsibleParserError(f"cluster plan {path} cannot be used:\n{exc}") from None
        self._set_options_from_plan(path)
        self._populate(expanded, path)

    def _set_options_from_plan(self, path: str) -> None:
        """Constructable options sit at the plan's top level; the plan was validated first,
        so this second read through Ansible's loader only picks them up (trusted, so that
        compose expressions may be templated)."""
        try:
            data = self.loader.load_from_file(path, cache="none", trusted_as_template=True)
        except TypeError:  # ansible-core before 2.19 has no data trust
            data = self.loader.load_from_file(path, cache="none")
        options = {
            k: data[k]
            for k in (
                "compose",
                "groups",
                "keyed_groups",
                "strict",
                "leading_separator",
                "use_extra_vars",
            )
            if k in data
        }
        self.set_options(direct={"plugin": self.NAME, **options}, var_options=self._vars)

    def _populate(self, expanded: dict[str, Any], path: str) -> None:
        """Hosts and groups in full; the plan's data as small templates over the lookup
        cluster_plan.cluster.plan, which reads the expansion this process keeps (so the
        inventory costs what a static one does, and `--list` does not copy the whole
        cluster into every host)."""
        from cluster_plan.ansible import inventory_store

        inventory = self.inventory
        plan_file = os.path.abspath(path)
        inventory_store.remember(plan_file, expanded)
        hosts = expanded["hosts"]
        inventory.set_variable("all", "cluster_plan_file", plan_file)
        inventory.set_variable("all", "cluster_plan", _template(CLUSTER_TEMPLATE))
        access = expanded["access"]
        connection = {
            "ansible_user": access["ansible_user"],
            "ansible_port": access["ssh_port"],
            **MITOGEN_KEEPALIVE,
        }
        connection.update(self._connection_vars(expanded, path))
        for name, value in connection.items():
            inventory.set_variable("all", name, value)
        for group in expanded["groups"]:
            inventory.add_group(group)
        host_template = _template(HOST_TEMPLATE)
        for name, host in hosts.items():
            inventory.add_host(name)
            inventory.set_variable(name, "ansible_host", host["address"])
            inventory.set_variable(name, "plan_host", host_template)
        for group, members in expanded["groups"].items():
            for name in members:
                inventory.add_child(group, name)
        self._construct(expanded)

    def _construct(self, expanded: dict[str, Any]) -> None:
        """compose, groups and keyed_groups see the real data, not the templates."""
        compose, groups, keyed = (self.get_option(k) for k in ("compose", "groups", "keyed_groups"))
        if not (compose or groups or keyed):
            return
        strict = self.get_option("strict")
        cluster = {k: v for k, v in expanded.items() if k not in ("hosts", "groups")}
        for name, host in expanded["hosts"].items():
            variables = {
                "plan_host": host,
                "cluster_plan": cluster,
                "ansible_host": host["address"],
            }
            self._set_composite_vars(compose, variables, name, strict=strict)
            # groups and keyed_groups see what compose made, as with Ansible's `constructed`;
            # and the data itself, not the host's inventory variables (templates over the
            # lookup)
            variables.update(self._composed(compose, name))
            self._add_host_to_composed_groups(
                groups, variables, name, strict=strict, fetch_hostvars=False
            )
            self._add_host_to_keyed_groups(
                keyed, variables, name, strict=strict, fetch_hostvars=False
            )

    def _composed(self, compose: dict[str, Any] | None, name: str) -> dict[str, Any]:
        """The variables compose set on the host (one it could not template is not set)."""
        host_vars = self.inventory.get_host(name).get_vars()
        return {key: host_vars[key] for key in compose or {} if key in host_vars}

    @staticmethod
    def _connection_vars(expanded: dict[str, Any], path: str) -> dict[str, Any]:
        """A lab plan is reached through the lab's admin namespace, never a host route, as
        root on port 22 (how the lab builds its nodes)."""
        if expanded["lab"] is None:
            return {}
        try:
            from cluster_plan.lab import connection_vars
        except ImportError:
            return {}
        result: dict[str, Any] = {"ansible_port": 22, **connection_vars(expanded, path)}
        return result
