"""Reporters: the same results printed for people (text) or for programs (JSON).

`--format` picks one; subcommands hand it what they found and never branch on the format
themselves (the check-jsonschema way). People read stderr for findings and stdout for
results; programs get one JSON document on stdout, even when the command fails.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml

from cluster_plan.findings import Finding, PlanError, errors, warnings


@dataclass
class FileReport:
    """The findings of one plan file."""

    file: str
    findings: list[Finding]
    source_lines: Sequence[str] | None
    nodes: int = 0

    @property
    def ok(self) -> bool:
        return not errors(self.findings)


def _source_lines(
    finding: Finding, plan_file: str | None, plan_lines: Sequence[str] | None
) -> Sequence[str] | None:
    """The lines a finding points into: the plan's, or those of the file it names (a lock)."""
    if finding.file is None or finding.file == plan_file:
        return plan_lines
    if finding.line is None:
        return None
    try:
        return Path(finding.file).read_text(errors="replace").splitlines()
    except OSError:
        return None


def render_findings(
    findings: Sequence[Finding], plan_file: str | None, plan_lines: Sequence[str] | None
) -> list[str]:
    return [
        f.render(_source_lines(f, plan_file, plan_lines))
        for f in findings
        if f.suppressed_by is None
    ]


class TextReporter:
    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr

    def files(self, reports: Sequence[FileReport]) -> None:
        for report in reports:
            for text in render_findings(report.findings, report.file, report.source_lines):
                print(text, file=self.err)
            shown = [f for f in report.findings if f.suppressed_by is None]
            suppressed = len(report.findings) - len(shown)
            note = f", {suppressed} suppressed" if suppressed else ""
            print(
                f"{report.file}: {'ok' if report.ok else 'FAILED'}: "
                f"{len(errors(shown))} error(s), {len(warnings(shown))} warning(s){note}",
                file=self.err,
            )

    def warnings(
        self,
        findings: Sequence[Finding],
        plan_file: str | None = None,
        plan_lines: Sequence[str] | None = None,
    ) -> None:
        for text in render_findings(warnings(findings), plan_file, plan_lines):
            print(text, file=self.err)

    def result(self, data: Any, text: Callable[[], str]) -> None:
        """A command's result: as text for people (``data`` is the JSON form)."""
        print(text(), file=self.out)

    def note(self, message: str) -> None:
        """A line for people only (what was written where); programs read the result."""
        print(message, file=self.err)

    def plan_error(self, exc: PlanError) -> None:
        first = exc.findings[0].file if exc.findings else None
        for text in render_findings(exc.findings, first, exc.source_lines):
            print(text, file=self.err)

    def error(self, line: str, error: dict[str, Any]) -> None:
        """The command failed with an error, not findings (``error`` is its JSON form)."""
        print(line, file=self.err)


class JsonReporter(TextReporter):
    """One JSON document on stdout, whatever happens: the result, or the error's envelope
    ({"status": "error", "error": {...}, "findings": [...]}) when there is no result."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        super().__init__(out, err)
        self.written = False

    def files(self, reports: Sequence[FileReport]) -> None:
        self._dump(
            [
                {
                    "file": r.file,
                    "ok": r.ok,
                    "nodes": r.nodes,
                    "findings": [f.as_dict() for f in r.findings],
                }
                for r in reports
            ]
        )

    def warnings(
        self,
        findings: Sequence[Finding],
        plan_file: str | None = None,
        plan_lines: Sequence[str] | None = None,
    ) -> None:
        return None  # part of the result document

    def result(self, data: Any, text: Callable[[], str]) -> None:
        self._dump(data)

    def plan_error(self, exc: PlanError) -> None:
        super().plan_error(exc)  # people still read why on stderr
        first = next(iter(errors(exc.findings) or exc.findings), None)
        message = f"{first.file or '<plan>'}: {first.message}" if first else "the plan failed"
        self._envelope({"message": message, "file": first.file if first else None},
                       [f.as_dict() for f in exc.findings])  # fmt: skip

    def error(self, line: str, error: dict[str, Any]) -> None:
        super().error(line, error)
        self._envelope(error, [])

    def _envelope(self, error: dict[str, Any], findings: list[dict[str, Any]]) -> None:
        if not self.written:  # a result printed before the failure is the document
            self._dump({"status": "error", "ok": False, "error": error, "findings": findings})

    def _dump(self, data: Any) -> None:
        json.dump(data, self.out, indent=2)
        print(file=self.out)
        self.written = True


class _PlainDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """Hosts share data (a profile's disks, a switch's path); print it in full each time
    rather than as &id001 anchors and *id001 aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _yaml(data: Any) -> str:
    return yaml.dump(data, Dumper=_PlainDumper, sort_keys=False, default_flow_style=False,
                     width=100)  # fmt: skip


def dump_yaml(data: Any, out: TextIO) -> None:
    """YAML in pieces: PyYAML slows down on one huge graph (it tracks every node for
    aliases), so each top-level key, and each entry of a large mapping such as `hosts`, is
    dumped on its own; the text is what one dump would give."""
    if not isinstance(data, dict):
        out.write(_yaml(data))
        return
    for key, value in data.items():
        if isinstance(value, dict) and len(value) > 64:
            out.write(_yaml({key: {}}).replace(" {}\n", "\n", 1))
            for name, entry in value.items():
                out.write("".join(f"  {line}\n" for line in _yaml({name: entry}).splitlines()))
        else:
            out.write(_yaml({key: value}))


class YamlReporter(TextReporter):
    """Structured results as YAML (what `expand` prints by default)."""

    def result(self, data: Any, text: Callable[[], str]) -> None:
        dump_yaml(data, self.out)


REPORTERS: dict[str, type[TextReporter]] = {
    "text": TextReporter,
    "json": JsonReporter,
    "yaml": YamlReporter,
}


def reporter_for(fmt: str | None) -> TextReporter:
    return REPORTERS[fmt or "text"]()
