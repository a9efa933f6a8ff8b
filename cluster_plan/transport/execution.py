"""How a command runs on a node: one small protocol, one executor for every transport.

Whatever reaches nodes (acceptance, `change`, `usage`) only ever calls `Executor.run` and
`Executor.spawn`. Real clusters use SSH, the lab runs a command inside a node's namespaces
(cluster_plan.transport.options picks the prefix); unit tests use a scripted fake.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class CommandResult:
    """What one command left behind; `rc` 127 means the tool was not found, 124 a timeout."""

    argv: tuple[str, ...]
    rc: int
    stdout: str
    stderr: str

    def raw(self) -> str:
        """The output as kept in a report for a failed measurement."""
        parts = [f"$ {shlex.join(self.argv)}", f"exit status {self.rc}"]
        if self.stdout:
            parts.append(f"--- stdout ---\n{self.stdout}")
        if self.stderr:
            parts.append(f"--- stderr ---\n{self.stderr}")
        return "\n".join(parts)


class Running(Protocol):
    def stop(self, grace_s: float = 0.0) -> CommandResult:
        """End the process (if still running after `grace_s`) and collect its output."""


class Executor(Protocol):
    def run(self, node: str, argv: Sequence[str], timeout: float) -> CommandResult:
        """Run argv on node to completion (or timeout), never raising for the command's sake."""

    def spawn(self, node: str, argv: Sequence[str]) -> Running:
        """Start argv on node in the background."""


class _Process:
    def __init__(self, argv: tuple[str, ...], proc: subprocess.Popen[str] | None, error: str):
        self._argv = argv
        self._proc = proc
        self._error = error

    def stop(self, grace_s: float = 0.0) -> CommandResult:
        if self._proc is None:
            return CommandResult(self._argv, 127, "", self._error)
        if grace_s > 0:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=grace_s)
        if self._proc.poll() is None:
            self._proc.terminate()
        try:
            out, err = self._proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            out, err = self._proc.communicate()
        return CommandResult(self._argv, self._proc.returncode, out, err)


class PrefixExecutor:
    """Runs `prefix(node) + argv` locally: SSH, `nsenter`, `cluster-plan lab run`, or nothing.

    `prefix` is a template list whose items may contain `{node}` and `{address}`, e.g.
    `["ssh", "-o", "BatchMode=yes", "root@{address}"]` or `["cluster-plan", "lab", "run",
    "inventory/lab/cluster.yml", "{node}", "--"]`. When the prefix goes through a shell on the
    far side (SSH), the command is quoted as one string.
    """

    def __init__(
        self,
        prefix: Sequence[str] = (),
        addresses: Mapping[str, str] | None = None,
        remote_shell: bool = False,
        per_node: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self._prefix = tuple(prefix)
        self._addresses = dict(addresses or {})
        self._remote_shell = remote_shell
        # With per-node prefixes, a node without one is unreachable: never fall back to
        # running its command here, on this machine's own network.
        self._per_node = None if per_node is None else {n: tuple(p) for n, p in per_node.items()}

    def command(self, node: str, argv: Sequence[str]) -> tuple[str, ...]:
        """The local argv; a node listed in `per_node` uses its own prefix (e.g. a lab pid)."""
        values = {"node": node, "address": self._addresses.get(node, node)}
        template = self._prefix if self._per_node is None else self._per_node[node]
        head = tuple(part.format(**values) for part in template)
        if self._remote_shell:
            return (*head, shlex.join(argv))
        return (*head, *argv)

    def _unreachable(self, node: str, argv: Sequence[str]) -> CommandResult | None:
        if self._per_node is not None and node not in self._per_node:
            return CommandResult(tuple(argv), 255, "", f"{node}: not running, cannot reach it")
        return None

    def run(self, node: str, argv: Sequence[str], timeout: float) -> CommandResult:
        if failed := self._unreachable(node, argv):
            return failed
        full = self.command(node, argv)
        try:
            proc = subprocess.run(
                full, capture_output=True, text=True, timeout=timeout, errors="replace", check=False
            )
        except FileNotFoundError as exc:
            return CommandResult(tuple(argv), 127, "", f"{exc.filename}: not found")
        except subprocess.TimeoutExpired as exc:
            return CommandResult(
                tuple(argv),
                124,
                _text(exc.stdout),
                _text(exc.stderr) + f"\ntimed out after {timeout:g} s",
            )
        return CommandResult(tuple(argv), proc.returncode, proc.stdout, proc.stderr)

    def spawn(self, node: str, argv: Sequence[str]) -> Running:
        if failed := self._unreachable(node, argv):
            return _Process(tuple(argv), None, failed.stderr)
        full = self.command(node, argv)
        try:
            proc = subprocess.Popen(
                full,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                text=True,
                errors="replace",
            )
        except FileNotFoundError as exc:
            return _Process(tuple(argv), None, f"{exc.filename}: not found")
        return _Process(tuple(argv), proc, "")


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return value


def last_json_object(text: str, key: str | None = None) -> dict[str, Any] | None:
    """The last line of a tool's output that is a JSON object (holding `key`, when given):
    rados bench and the collectives program print their document last, after progress."""
    for line in reversed(text.splitlines()):
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict) and (key is None or key in data):
            return data
    return None
