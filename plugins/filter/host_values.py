"""Filters that check a plan value against its grammar where a template writes it
(cluster_plan.host_values): `grammar` (a schema grammar by name) and `authorized_key` (a
key line sshd accepts)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleFilterError

try:
    from cluster_plan import host_values as _values
except ImportError:  # run from a checkout where the package is not installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from cluster_plan import host_values as _values


def grammar(value: Any, name: str) -> str:
    try:
        return _values.in_grammar(value, name)
    except _values.UnsafeValue as exc:
        raise AnsibleFilterError(str(exc)) from None


def authorized_key(value: Any) -> str:
    try:
        return _values.authorized_key(value)
    except _values.UnsafeValue as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule:
    """Ansible filters; see cluster_plan.host_values."""

    def filters(self) -> dict[str, Any]:
        return {"grammar": grammar, "authorized_key": authorized_key}
