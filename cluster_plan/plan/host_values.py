"""Plan values on their way into a host's file: the templates' second line of defence.

The schema keeps each plan string to its grammar; the roles check again, with the same
grammars (read from the schema's $defs, so each is stated once), right where a value is
written, so a plan that skipped validate, or a value a role computed, still cannot add a line,
a directive or a section to the file.
"""

from __future__ import annotations

from cluster_plan.plan.schema import grammar
from cluster_plan.plan.ssh_keys import key_problem

_SHOWN = 60


class UnsafeValue(ValueError):
    """A value that would change the structure of the file it is written into."""


def _shown(value: str) -> str:
    return repr(value) if len(value) <= _SHOWN else repr(value[:_SHOWN]) + "..."


def in_grammar(value: object, name: str) -> str:
    """`value` unchanged when it is a string of the plan grammar `name` (a $defs entry of the
    schema: path, directory, url, user_name, hostname, calendar, ...); UnsafeValue if not."""
    pattern, longest, what = grammar(name)
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise UnsafeValue(f"refusing to write {value!r} into a host's file: it is not {what}")
    text = str(value)
    if not pattern.search(text) or (longest is not None and len(text) > longest):
        raise UnsafeValue(
            f"refusing to write {_shown(text)} into a host's file: it is not {what} "
            "(validate the plan: cluster-plan validate)"
        )
    return text


def grammar_problem(value: object, name: str) -> str:
    """Why `value` is not of the plan grammar `name`, in words; '' when it is (for a role's
    assert, which states the failure in its own fail_msg)."""
    try:
        in_grammar(value, name)
    except UnsafeValue:
        return f"{_shown(str(value))} is not {grammar(name)[2]}"
    return ""


def authorized_key(value: object) -> str:
    """`value` unchanged when it is one authorized_keys line sshd accepts (ssh_keys.key_problem)."""
    text = str(value)
    problem = key_problem(text)
    if problem:
        raise UnsafeValue(f"refusing to write {_shown(text)} into authorized_keys: {problem}")
    return text
