"""Filters that check a plan value against its grammar where a template writes it
(cluster_plan.plan.host_values): `grammar` (a schema grammar by name), `grammar_problem` (why
a value is not of one, for an assert), `authorized_key` (a key line sshd accepts) and
`systemd_argument` (one quoted argument of a unit's ExecStart)."""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError

from cluster_plan.plan import host_values as _values


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


def systemd_argument(value: Any) -> str:
    """One argument of a unit's ExecStart, double-quoted so that systemd passes it as it is:
    a plan's string is data, never more arguments, a variable or a specifier."""
    text = str(value)
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise AnsibleFilterError(f"refusing to write {text!r} into a unit: control characters")
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    return f'"{escaped}"'


class FilterModule:
    """Ansible filters; see cluster_plan.plan.host_values."""

    def filters(self) -> dict[str, Any]:
        return {
            "grammar": grammar,
            "grammar_problem": _values.grammar_problem,
            "authorized_key": authorized_key,
            "systemd_argument": systemd_argument,
        }
