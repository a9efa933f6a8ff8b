"""ansible-lint and yamllint over the whole tree, run once per test session (see conftest.py):
each finding is kept with its file, so the tree test and the per-role tests read one run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
# yamllint -f parsable: "./roles/x/tasks/main.yml:3:1: [error] message (rule)"
_PARSABLE = re.compile(r"^(?:\./)?(?P<path>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<text>.*)$")


@dataclass(frozen=True)
class LintRun:
    """One linter run over the repository: its exit code, its output, and its findings."""

    command: tuple[str, ...]
    returncode: int
    output: str
    findings: tuple[tuple[str, str], ...]  # (path relative to ROOT, "line: rule message")

    @property
    def complete(self) -> bool:
        """The run read the tree: it passed with no finding, or failed with its findings parsed
        (a crash or a broken config fails with none, and must not pass a per-role test)."""
        return (self.returncode == 0) == (not self.findings)

    def report(self) -> str:
        """Every finding on its own line, then the end of the tool's own output."""
        lines = [f"{path}:{text}" for path, text in self.findings]
        return "\n".join([*lines, self.output[-3000:]])

    def under(self, folder: str) -> list[str]:
        """The findings in files under ``folder`` (relative to the repository root)."""
        prefix = folder.rstrip("/") + "/"
        return [f"{path}:{text}" for path, text in self.findings if path.startswith(prefix)]


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_HOME": str(ROOT / ".ansible"),
        "NO_COLOR": "1",
    }


def _run(command: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=900, check=False
    )


def run_ansible_lint() -> LintRun:
    """The production profile over everything .ansible-lint does not exclude."""
    command = (
        str(BIN / "ansible-lint"),
        "--profile",
        "production",
        "--offline",
        "--nocolor",
        "--format",
        "codeclimate",
    )
    result = _run(command)
    findings: list[tuple[str, str]] = []
    try:
        issues = json.loads(result.stdout or "[]")
    except json.JSONDecodeError:
        issues = []  # the output is kept; a non-zero exit code still fails the tree test
    for issue in issues:
        if issue.get("severity") == "minor":
            continue  # a warning: ansible-lint still exits 0, and so do the tests
        where = issue.get("location", {})
        line = where.get("lines", {}).get("begin") or where.get("positions", {}).get(
            "begin", {}
        ).get("line")
        text = f"{line}: {issue.get('check_name')} {issue.get('description')}"
        findings.append((where.get("path", "?"), text))
    output = result.stderr if issues else result.stdout + result.stderr
    return LintRun(command, result.returncode, output, tuple(findings))


def run_yamllint() -> LintRun:
    """yamllint, strict (warnings fail), over the repository with the project's .yamllint."""
    command = (str(BIN / "yamllint"), "-s", "-f", "parsable", ".")
    result = _run(command)
    findings = []
    for line in result.stdout.splitlines():
        match = _PARSABLE.match(line)
        if match:
            findings.append((match["path"], f"{match['line']}:{match['col']}: {match['text']}"))
    return LintRun(command, result.returncode, result.stdout + result.stderr, tuple(findings))
