"""Findings: every problem found in a plan, with where it is and what to do about it; and the
one severity scale every finding of every command is reported on.

A plan's finding is a Finding (its code in cluster_plan.plan.finding_codes); a live host's is a
HostFinding (cluster_plan.day2.remote.findings), an acceptance run's a verdict's Finding
(cluster_plan.acceptance.verdicts). Each says how bad it is on SEVERITIES; the acceptance
report's own word for an error, `fault`, is put on the scale where the JSON envelope carries
it (envelope_finding)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from cluster_plan.plan.secrets import mask_userinfo

Severity = Literal["error", "warning"]
# error: a check failed; warning: worth a look, and no check failed for it
SEVERITIES: tuple[Severity, ...] = ("error", "warning")
# Other words a command's own document uses for a finding's severity, on the scale.
SEVERITY_WORDS: dict[str, Severity] = {"fault": "error"}
PathPart = str | int
JsonPath = tuple[PathPart, ...]

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def format_path(path: Sequence[PathPart]) -> str:
    """Render a path as JSONPath: ``$.networks.mgmt.cidr``, ``$.hardware['gpu-h100']``."""
    out = "$"
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and _IDENTIFIER.match(part):
            out += f".{part}"
        else:  # any other key, even one a broken plan smuggles in (None from `hardware:`)
            out += "[" + json.dumps(str(part)).replace('"', "'") + "]"
    return out


@dataclass(frozen=True)
class Finding:
    code: str
    message: str
    path: JsonPath = ()
    severity: Severity = "error"
    hint: str | None = None
    file: str | None = None
    line: int | None = None  # 1-based
    column: int | None = None  # 1-based
    suppressed_by: str | None = field(default=None, compare=False)

    @property
    def json_path(self) -> str:
        return format_path(self.path)

    def located(self, file: str, line: int | None, column: int | None) -> Finding:
        return Finding(
            self.code,
            self.message,
            self.path,
            self.severity,
            self.hint,
            file,
            line,
            column,
            self.suppressed_by,
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "severity": self.severity,
            "code": self.code,
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "path": self.json_path,
            "message": mask_userinfo(self.message),
            "hint": mask_userinfo(self.hint) if self.hint else self.hint,
            "suppressed_by": self.suppressed_by,
        }

    def where(self) -> str:
        if self.file is None:
            return "<plan>"
        if self.line is None:
            return self.file
        return f"{self.file}:{self.line}:{self.column or 1}"

    def render(self, source_lines: Sequence[str] | None = None) -> str:
        """The finding for people, with the source line it points at (URL userinfo masked:
        cluster_plan.plan.secrets)."""
        head = f"{self.where()}: {self.severity}[{self.code}] {self.json_path}: {self.message}"
        lines = [head]
        line = self.line or 0
        if source_lines is not None and 0 < line <= len(source_lines):
            text = source_lines[line - 1].rstrip("\n")
            lines.append(f"    {text}")
            lines.append("    " + " " * max((self.column or 1) - 1, 0) + "^")
        if self.hint:
            lines.append(f"    hint: {self.hint}")
        return mask_userinfo("\n".join(lines))


def envelope_finding(finding: Mapping[str, Any]) -> dict[str, Any]:
    """A command's finding as the JSON envelope carries it: its severity on the one scale,
    and, where its own document says it in another word (an acceptance report's `fault`),
    that word as `report_severity`."""
    word = finding.get("severity")
    if not isinstance(word, str) or word not in SEVERITY_WORDS:
        return dict(finding)
    return {**finding, "severity": SEVERITY_WORDS[word], "report_severity": word}


def errors(findings: Iterable[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity == "error" and f.suppressed_by is None]


def warnings(findings: Iterable[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity == "warning" and f.suppressed_by is None]


def sort_key(finding: Finding) -> tuple[str, int, int, str]:
    return (finding.file or "", finding.line or 0, finding.column or 0, finding.code)


class PlanError(Exception):
    """Raised by the API when a plan cannot be used; carries every finding."""

    def __init__(self, findings: Sequence[Finding], source_lines: Sequence[str] | None = None):
        self.findings = list(findings)
        self.source_lines = source_lines
        super().__init__(self.render())

    def render(self) -> str:
        shown = [f for f in self.findings if f.suppressed_by is None]
        return "\n".join(f.render(self.source_lines) for f in shown)
