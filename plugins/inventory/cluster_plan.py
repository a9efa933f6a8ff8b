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


class InventoryModule(BaseInventoryPlugin, Constructable):
    NAME = "cluster_plan"

    def verify_file(self, path: str) -> bool:
        if not super().verify_file(path) or not path.endswith((".yml", ".yaml")):
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
        inventory = self.inventory
        hosts = expanded["hosts"]
        cluster = {k: v for k, v in expanded.items() if k not in ("hosts", "groups")}
        inventory.set_variable("all", "cluster_plan", cluster)
        inventory.set_variable("all", "cluster_plan_file", os.path.abspath(path))
        access = expanded["access"]
        connection = {"ansible_user": access["ansible_user"], "ansible_port": access["ssh_port"]}
        connection.update(self._connection_vars(expanded, path))
        for name, value in connection.items():
            inventory.set_variable("all", name, value)
        for group in expanded["groups"]:
            inventory.add_group(group)
        for name, host in hosts.items():
            inventory.add_host(name)
            inventory.set_variable(name, "ansible_host", host["address"])
            inventory.set_variable(name, "plan_host", host)
        for group, members in expanded["groups"].items():
            for name in members:
                inventory.add_child(group, name)
        strict = self.get_option("strict")
        for name, host in hosts.items():
            variables = {
                "plan_host": host,
                "cluster_plan": cluster,
                "ansible_host": host["address"],
            }
            self._set_composite_vars(self.get_option("compose"), variables, name, strict=strict)
            self._add_host_to_composed_groups(
                self.get_option("groups"), variables, name, strict=strict
            )
            self._add_host_to_keyed_groups(
                self.get_option("keyed_groups"), variables, name, strict=strict
            )

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
