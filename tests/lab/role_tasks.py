"""The roles' tasks as data: every task file walked, the install tasks found (for the tests
of the packages the roles install, and of the node images that hold them)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta
import yaml

from cluster_plan.lab.role_packages import ROLES, load_role_vars

INSTALL_MODULES = {"ansible.builtin.apt", "ansible.builtin.package", "apt", "package"}
SET_FACT = {"ansible.builtin.set_fact", "set_fact"}
APT_GET_INSTALL = re.compile(r"apt-get install((?:\s+-\S+)*)((?:\s+[a-z0-9][a-z0-9.+-]*)+)")


class _AnyName(dict[str, Any]):
    """Every filter and test name is taken: only the variables are read, nothing runs."""

    def __contains__(self, _name: object) -> bool:
        return True

    def get(self, name: str, default: Any = None) -> Any:
        return super().get(name, lambda *_args, **_kwargs: None)


# a condition that holds on another distribution only (the role's dnf or rpm tasks)
OTHER_DISTRIBUTION = re.compile(r"!=\s*'Debian'$|==\s*'(RedHat|rpm|dnf)'$")
_JINJA = jinja2.Environment()
_JINJA.filters = _AnyName()
_JINJA.tests = _AnyName()


@dataclass(frozen=True)
class Task:
    """An install task of a role: where it is, its `name:`, its Recommends setting."""

    role: str
    path: Path
    title: str  # the task's own name
    names: str
    recommends: bool
    local_vars: dict[str, Any]


def _tasks(items: Any) -> Iterator[dict[str, Any]]:
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        yield item
        for key in ("block", "rescue", "always"):
            yield from _tasks(item.get(key))


def task_files(roles: Path = ROLES) -> Iterator[tuple[str, Path, dict[str, Any]]]:
    for path in sorted([*roles.glob("*/tasks/**/*.yml"), *roles.glob("*/handlers/*.yml")]):
        role = path.relative_to(roles).parts[0]
        for task in _tasks(yaml.safe_load(path.read_text())):
            yield role, path, task


def runs_on_debian(task: dict[str, Any]) -> bool:
    """False for a task another distribution's condition keeps off Debian."""
    when = task.get("when") or []
    conjuncts = when if isinstance(when, list) else [when]
    return not any(OTHER_DISTRIBUTION.search(str(c).strip()) for c in conjuncts)


def install_tasks() -> list[Task]:
    found = []
    for role, path, task in task_files():
        module = next((m for m in INSTALL_MODULES if m in task), None)
        args = task.get(module) if module else None
        if isinstance(args, dict) and "name" in args and runs_on_debian(task):
            found.append(
                Task(
                    role,
                    path,
                    str(task.get("name") or ""),
                    str(args["name"]),
                    args.get("install_recommends") is not False,
                    dict(task.get("vars") or {}),
                )
            )
    return found


def definitions() -> dict[str, Any]:
    """What each variable is made of: the roles' defaults and vars, their set_facts."""
    found: dict[str, Any] = dict(load_role_vars())
    for _role, _path, task in task_files():
        for module in SET_FACT & set(task):
            if isinstance(task[module], dict):
                found.update(task[module])
    return found


def identifiers(expression: Any) -> set[str]:
    """The variables a (Jinja) value reads."""
    if isinstance(expression, dict):
        return set().union(*(identifiers(v) for v in expression.values()))
    if isinstance(expression, list):
        return set().union(*(identifiers(v) for v in expression))
    if not isinstance(expression, str) or "{{" not in expression:
        return set()
    return set(jinja2.meta.find_undeclared_variables(_JINJA.parse(expression)))
