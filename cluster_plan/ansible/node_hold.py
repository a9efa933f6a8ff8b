"""What the action plugins that hold a node out of service share (`slurm_drain`,
`k8s_cordon`): each runs on the controller, sends its commands to the task's host, and turns
the drain's decision into the task's result the same way."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any, Protocol

# a shell command line -> Ansible's result of running it on the task's host
Execute = Callable[[str], dict[str, Any]]
# argv -> (exit status, stdout, stderr)
Run = Callable[[list[str]], tuple[int, str, str]]


class Decision(Protocol):
    """A drain's or a cordon's decision (cluster_plan.slurm.drain.Decision)."""

    action: str
    message: str
    held_by: str | None


def on_host(execute: Execute, environment: dict[str, str] | None = None) -> Run:
    """A Run that sends each argv, quoted, to the task's host, with `environment` before it."""
    prefix = "".join(f"{name}={shlex.quote(value)} " for name, value in (environment or {}).items())

    def run(argv: list[str]) -> tuple[int, str, str]:
        done = execute(prefix + shlex.join(argv))
        return int(done.get("rc", 1)), str(done.get("stdout", "")), str(done.get("stderr", ""))

    return run


def task_result(
    result: dict[str, Any], node: str, decision: Decision, changing: frozenset[str]
) -> dict[str, Any]:
    """The task's result: changed when the decision's action is one of `changing`; a hold that
    is someone else's (kept as it is) is a warning too."""
    result.update(
        changed=decision.action in changing,
        node=node,
        action=decision.action,
        held_by=decision.held_by,
        msg=decision.message,
    )
    if decision.held_by is not None:
        result["warnings"] = [decision.message]
    return result
