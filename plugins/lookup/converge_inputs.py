"""Lookup plugin: a digest of everything a role converges a host from."""

from __future__ import annotations

DOCUMENTATION = r"""
name: converge_inputs
short_description: Digest of what a role converges a host from
description:
  - One digest per role named, for the host the task runs for. It covers the role's code
    (its directory), the collection's plugins and the C(cluster_plan) package; the plan file
    and its lock file; the value for this host of every variable the role declares (its
    C(meta/argument_specs.yml) options and C(defaults/main.yml)), whatever sets it (defaults,
    inventory, C(-e)); the host's expanded plan data (C(plan_host)); and the host facts that
    change what a role renders (distribution, kernel, architecture, CPUs, memory,
    virtualisation). A role variable named C(ROLE_controller_files) lists files on the
    controller the role reads or keeps (the backup role's passphrases), whose mode and
    content count too.
  - A role that converged from the same digest, and whose record still holds, would change
    nothing (module C(cluster_plan.cluster.role_converged)); any other change of input gives
    another digest.
  - The term C(shared) followed by role names returns, once, what does not depend on the host
    (the code and plan digest and the names of each role's variables), for the option
    C(shared) of the per-host calls; without it each call computes it again.
options:
  _terms:
    description: Role names; or C(shared) followed by role names.
    required: true
    type: list
    elements: str
  shared:
    description: What the term C(shared) returned (saves reading the code for each host).
    type: dict
    default: {}
  explain:
    description:
      - Return what each digest is computed from instead (to see why a stage runs again).
        It holds the role's variables as they are, secrets included; for a look by hand.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: What the common role converges this host from
  ansible.builtin.debug:
    msg: "{{ query('cluster_plan.cluster.converge_inputs', 'common') | first }}"
"""

RETURN = r"""
_raw:
  description: One digest (hex SHA-256) per role; for C(shared), one dict by role.
  type: list
"""

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from ansible.errors import AnsibleError, AnsibleLookupError
from ansible.plugins.lookup import LookupBase

COLLECTION = Path(__file__).resolve().parents[2]
# What a role renders may follow these (OS variables, memory targets, container detection).
FACTS = (
    "distribution",
    "distribution_major_version",
    "distribution_release",
    "distribution_version",
    "os_family",
    "architecture",
    "kernel",
    "processor_vcpus",
    "memtotal_mb",
    "virtualization_role",
    "virtualization_tech_guest",
    "virtualization_type",
)
SKIPPED_FILES = {"README.md"}


def tree_digest(paths: list[Path]) -> str:
    """SHA-256 over every file under `paths` (names relative to the collection, contents)."""
    digest = hashlib.sha256()
    for top in paths:
        files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        for path in files:
            if path.name in SKIPPED_FILES or "__pycache__" in path.parts:
                continue
            digest.update(str(path.relative_to(top.parent)).encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def package_dir() -> Path:
    import cluster_plan

    return Path(cluster_plan.__file__).resolve().parent


def role_dir(role: str) -> Path:
    path = COLLECTION / "roles" / role
    if not (path / "tasks").is_dir():
        raise AnsibleLookupError(f"converge_inputs: no role {role!r} under {COLLECTION / 'roles'}")
    return path


def declared_variables(role: str) -> list[str]:
    """The variables a role declares: every entry point's options, and its defaults; not its
    distribution data (vars/*.yml), which the role loads as it starts (so they are unset
    before it) and which its code digest and the host's distribution facts already cover."""
    path = role_dir(role)
    names: set[str] = set()
    distribution_data: set[str] = set()
    for data_file in sorted((path / "vars").glob("*.yml")):
        distribution_data.update(yaml.safe_load(data_file.read_text()) or {})
    specs_file = path / "meta" / "argument_specs.yml"
    if specs_file.is_file():
        specs = (yaml.safe_load(specs_file.read_text()) or {}).get("argument_specs") or {}
        for entry in specs.values():
            names.update((entry or {}).get("options") or {})
    defaults_file = path / "defaults" / "main.yml"
    if defaults_file.is_file():
        names.update(yaml.safe_load(defaults_file.read_text()) or {})
    return sorted(names - distribution_data)


def plan_files(plan_file: str) -> list[Path]:
    from cluster_plan.plan.lockfile import lock_path_for

    return [p for p in (Path(plan_file), Path(lock_path_for(plan_file))) if p.is_file()]


def shared_inputs(roles: list[str], plan_file: str) -> dict[str, dict[str, Any]]:
    common = tree_digest([COLLECTION / "plugins", package_dir()])
    plan = tree_digest(plan_files(plan_file)) if plan_file else ""
    return {
        role: {
            "code": hashlib.sha256(
                f"{common}\0{tree_digest([role_dir(role)])}\0{plan}".encode()
            ).hexdigest(),
            "variables": declared_variables(role),
        }
        for role in roles
    }


def controller_file_digest(path: Any) -> str:
    """A file on the controller a role reads or keeps (a role's ROLE_controller_files): its
    mode and content digest, or that it is missing."""
    try:
        data = Path(str(path)).read_bytes()
        mode = Path(str(path)).stat().st_mode & 0o7777
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"unreadable: {exc.strerror}"
    return f"{mode:04o} {hashlib.sha256(data).hexdigest()}"


def plain(value: Any) -> Any:
    """Templated data as plain JSON types (ansible-core 2.19 hands out tagged containers)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = [plain(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, set | frozenset) else items
    if value is None or isinstance(value, bool | int | float):
        return value
    return str(value)


def controller_files(values: dict[str, Any]) -> dict[str, str]:
    """The digest of each file a role's ROLE_controller_files variables list."""
    return {
        path: controller_file_digest(path)
        for name, paths in sorted(values.items())
        if name.endswith("_controller_files") and isinstance(paths, list)
        for path in paths
    }


def fact(value: Any) -> Any:
    """A host fact as plain data. A list fact is a set Ansible builds in no fixed order
    (virtualization_tech_guest came back as [container, other] and as [other, container] from
    two gatherings of one node): sorted, so that gathering facts again is no change."""
    value = plain(value)
    return sorted(value, key=repr) if isinstance(value, list) else value


class LookupModule(LookupBase):
    def run(self, terms: list[Any], variables: dict[str, Any] | None = None,
            **kwargs: Any) -> list[Any]:  # fmt: skip
        self.set_options(var_options=variables, direct=kwargs)
        variables = variables or {}
        plan_file = str(variables.get("cluster_plan_file") or "")
        names = [str(term) for term in terms]
        if names[:1] == ["shared"]:
            return [shared_inputs(names[1:], plan_file)]
        shared = self.get_option("shared") or {}
        missing = [role for role in names if role not in shared]
        if missing:
            shared = {**shared, **shared_inputs(missing, plan_file)}
        facts = variables.get("ansible_facts") or {}
        host = {
            "host": str(variables.get("inventory_hostname", "")),
            "plan_host": self._value(variables, "plan_host"),
            "facts": {name: fact(facts.get(name)) for name in FACTS},
        }
        results = []
        for role in names:
            values = {name: self._value(variables, name) for name in shared[role]["variables"]}
            inputs = {
                **host,
                "code": shared[role]["code"],
                "variables": values,
                "controller_files": controller_files(values),
            }
            if self.get_option("explain"):
                results.append(inputs)
                continue
            text = json.dumps(inputs, sort_keys=True, separators=(",", ":"))
            results.append(hashlib.sha256(text.encode()).hexdigest())
        return results

    def _value(self, variables: dict[str, Any], name: str) -> Any:
        """The variable's value for this host, templated; a variable that cannot be templated
        here (it refers to what the role sets while it runs) counts by its expression."""
        if name not in variables:
            return "<unset>"
        try:
            return plain(self._templar.template(variables[name]))
        except AnsibleError:
            return "<not templatable> " + os.fsdecode(repr(variables[name]))
