"""The JSON envelope of every command's `--format json` (schemas/cli-output.schema.json,
docs/cli-output.md): what its status means, and how a reader takes the result out of it.

{"schema_version": 1, "command": "drift", "status": "ok" | "failed" | "error", "exit": 0,
 "findings": [...], "result": <the command's own document>, "error": null | {...}}
"""

from __future__ import annotations

from typing import Any

SCHEMA_VERSION = 1  # raised when a field is removed or changes meaning

# exit 0 and 1 are a command that finished (cluster_plan.cli.policy.Exit OK and FAILED)
_STATUS_BY_EXIT = {0: "ok", 1: "failed"}


class EnvelopeError(ValueError):
    """A command's output that holds no result to read (it stopped, or is of another version)."""


def status_for(exit: int, error: dict[str, Any] | None) -> str:
    """ok: done, exit 0; failed: done, and a check failed (exit 1, the findings or the result
    say why); error: the command stopped (an error, or exit 2, 3 or 130)."""
    if error is not None:
        return "error"
    return _STATUS_BY_EXIT.get(exit, "error")


def finished_result(data: dict[str, Any], command: str | None = None) -> Any:
    """The result of a command that finished (ok or failed); EnvelopeError when the command
    stopped, when it was another command, or when the envelope is of another version."""
    if data.get("schema_version") != SCHEMA_VERSION:
        raise EnvelopeError(f"output version {data.get('schema_version')}, not {SCHEMA_VERSION}")
    if command is not None and data.get("command") != command:
        raise EnvelopeError(f"the output of `{data.get('command')}`, not of `{command}`")
    if data.get("status") not in ("ok", "failed"):
        error = data.get("error") or {}
        raise EnvelopeError(f"{data.get('status')}: {error.get('message', '')}".rstrip(": "))
    return data.get("result")


def unwrapped(data: object, command: str) -> object:
    """A file that may hold `command --format json` output or the bare result (as written by
    hand, or saved by a version before the envelope): the result either way."""
    if isinstance(data, dict) and "schema_version" in data and "result" in data:
        return finished_result(data, command)
    return data
