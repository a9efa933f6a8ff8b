"""Render a role's templates for one plan host the way Ansible would, without a host.

Variables are layered as in a play: role defaults, the distribution's vars file, the role's
vars/main.yml, then what the
cluster_plan inventory plugin gives the host (`cluster_plan`, `plan_host`, `hostvars`,
`groups`). Strings from the role's YAML are trusted as templates, as Ansible trusts them.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import collection_loader  # noqa: F401  (the roles name their filters by FQCN)
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROOT = Path(__file__).resolve().parents[2]
ROLES = ROOT / "roles"


def _trusted(value: Any) -> Any:
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {k: _trusted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_trusted(v) for v in value]
    return value


@cache
def _role_file(path: str) -> Any:
    """A role's defaults or vars file, read once: parsing YAML is most of a render's time."""
    return _trusted(DataLoader().load_from_file(path))


def host_variables(
    role: str,
    expanded: dict[str, Any],
    host: str,
    overrides: dict[str, Any] | None = None,
    distribution: str = "Debian",
    facts: dict[str, Any] | None = None,
) -> dict[str, Any]:
    plan = {k: v for k, v in expanded.items() if k not in ("hosts", "groups")}
    hosts = expanded["hosts"]
    groups = {"all": list(hosts), **expanded["groups"]}
    variables: dict[str, Any] = {}
    variables.update(_role_file(str(ROLES / role / "defaults/main.yml")))
    variables.update(_role_file(str(ROLES / role / "vars" / f"{distribution}.yml")))
    if (ROLES / role / "vars" / "main.yml").is_file():  # what the role derives from those
        variables.update(_role_file(str(ROLES / role / "vars" / "main.yml")))
    variables.update(
        cluster_plan=plan,
        plan_host=hosts[host],
        hostvars={name: {"plan_host": h} for name, h in hosts.items()},
        groups=groups,
        inventory_hostname=host,
        ansible_managed="Ansible managed",
        ansible_check_mode=False,
        ansible_facts={"distribution": distribution, "os_family": distribution, **(facts or {})},
    )
    variables.update(overrides or {})
    return variables


def templar(role: str, variables: dict[str, Any]) -> Templar:
    del role  # every role's filters come from the collection
    return Templar(loader=DataLoader(), variables=variables)


def render(
    role: str,
    template: str,
    expanded: dict[str, Any],
    host: str,
    overrides: dict[str, Any] | None = None,
    **kwargs: Any,
) -> str:
    """The text `template` (a file under roles/ROLE/templates) renders to for `host`."""
    variables = host_variables(role, expanded, host, overrides, **kwargs)
    source = (ROLES / role / "templates" / template).read_text()
    return str(templar(role, variables).template(trust_as_template(source)))


def value(
    role: str,
    expression: str,
    expanded: dict[str, Any],
    host: str,
    overrides: dict[str, Any] | None = None,
) -> Any:
    """A role variable or expression, templated for `host`."""
    variables = host_variables(role, expanded, host, overrides)
    return templar(role, variables).template(trust_as_template("{{ " + expression + " }}"))
