"""Reporters: the same results printed for people (text) or for programs (JSON).

`--format` picks one; subcommands hand it what they found and never branch on the format
themselves (the check-jsonschema way). People read stderr for findings and stdout for
results; programs get one JSON document on stdout, even when the command fails.
"""

from __future__ import annotations

import abc
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml

from cluster_plan.cli.envelope import SCHEMA_VERSION, status_for
from cluster_plan.plan.findings import Finding, PlanError, envelope_finding, errors, warnings
from cluster_plan.plan.input_files import non_finite_problem

NOT_FINITE_EXIT = 2  # cluster_plan.cli.policy.Exit.USAGE: input that could not be used


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


class Reporter(abc.ABC):
    """What a command calls to say what it found; `--format` picks the implementation.

    Commands never branch on the format nor print results themselves, so a text line cannot
    reach a JSON stdout. Every call but `finish` may come in any order; the CLI's policy calls
    `finish` once, with the exit status, after the command returned or raised. What this base
    class does itself goes to stderr only, which people read whatever the format."""

    def __init__(
        self, out: TextIO | None = None, err: TextIO | None = None, command: str = ""
    ) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.command = command

    @abc.abstractmethod
    def files(self, reports: Sequence[FileReport]) -> None:
        """The findings of each plan file checked (validate)."""

    @abc.abstractmethod
    def warnings(
        self,
        findings: Sequence[Finding],
        plan_file: str | None = None,
        plan_lines: Sequence[str] | None = None,
    ) -> None:
        """The warnings among ``findings``, beside a result."""

    @abc.abstractmethod
    def result(
        self,
        data: Any,
        text: Callable[[], str],
        findings: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        """The command's result: ``data`` is its structured form, ``text()`` its text form
        (which already shows ``findings``, the result's findings as dicts)."""

    def note(self, message: str) -> None:
        """A line for people only (what was written where); programs read the result."""
        print(message, file=self.err)

    @property
    def progress(self) -> TextIO:
        """Where a long command writes what it does as it goes, for people: stderr, where
        stdout is kept for one document."""
        return self.err

    def plan_error(self, exc: PlanError) -> None:
        """The plan the command needed fails its checks (or cannot be read): its findings."""
        first = exc.findings[0].file if exc.findings else None
        for text in render_findings(exc.findings, first, exc.source_lines):
            print(text, file=self.err)

    def error(self, line: str, error: dict[str, Any]) -> None:
        """The command stopped with an error: ``line`` for people, ``error`` its JSON form
        ({"message", "file"})."""
        print(line, file=self.err)

    @abc.abstractmethod
    def finish(self, exit: int) -> int:
        """The command is over and exits with ``exit``; the exit status it ends with."""


class TextReporter(Reporter):
    """For people: results on stdout, findings and errors on stderr."""

    @property
    def progress(self) -> TextIO:
        return self.out  # beside the results people read

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

    def result(
        self,
        data: Any,
        text: Callable[[], str],
        findings: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        print(text(), file=self.out)

    def finish(self, exit: int) -> int:
        return exit  # everything is printed as it comes


class JsonReporter(Reporter):
    """For programs: one JSON document on stdout, whatever happens, written by `finish`:
    {"schema_version", "command", "status", "exit", "findings", "result", "error"}
    (cluster_plan.cli.envelope). People still read findings and errors on stderr."""

    def __init__(
        self, out: TextIO | None = None, err: TextIO | None = None, command: str = ""
    ) -> None:
        super().__init__(out, err, command)
        self._result: Any = None
        self._findings: list[Mapping[str, Any]] = []
        self._error: dict[str, Any] | None = None

    def files(self, reports: Sequence[FileReport]) -> None:
        self._result = [
            {
                "file": r.file,
                "ok": r.ok,
                "nodes": r.nodes,
                "findings": [f.as_dict() for f in r.findings],
            }
            for r in reports
        ]
        self._findings += [f.as_dict() for r in reports for f in r.findings]

    def warnings(
        self,
        findings: Sequence[Finding],
        plan_file: str | None = None,
        plan_lines: Sequence[str] | None = None,
    ) -> None:
        self._findings += [f.as_dict() for f in warnings(findings)]

    def result(
        self,
        data: Any,
        text: Callable[[], str],
        findings: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        self._result = data
        self._findings += [envelope_finding(f) for f in findings]

    def plan_error(self, exc: PlanError) -> None:
        super().plan_error(exc)  # people still read why on stderr
        first = next(iter(errors(exc.findings) or exc.findings), None)
        message = f"{first.file or '<plan>'}: {first.message}" if first else "the plan failed"
        self._error = {"message": message, "file": first.file if first else None}
        self._findings += [f.as_dict() for f in exc.findings]

    def error(self, line: str, error: dict[str, Any]) -> None:
        super().error(line, error)
        self._error = error

    def _document(self, exit: int) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "command": self.command,
            "status": status_for(exit, self._error),
            "exit": int(exit),
            "findings": self._findings,
            "result": self._result,
            "error": self._error,
        }

    def finish(self, exit: int) -> int:
        document = self._document(exit)
        try:
            text = json.dumps(document, indent=2, allow_nan=False)
        except ValueError:  # NaN or Infinity: no JSON parser reads a document that holds one
            exit = max(int(exit), NOT_FINITE_EXIT)
            text = json.dumps(self._not_finite(document, exit), indent=2, allow_nan=False)
        print(text, file=self.out)
        return exit

    def _not_finite(self, document: dict[str, Any], exit: int) -> dict[str, Any]:
        """The error document instead: where the number stood; a bug let it past the checks
        of the input it came from."""
        problem = non_finite_problem(document) or "a number is not finite"
        message = f"the output cannot be written as JSON: {problem}"
        super().error(f"cluster-plan {self.command}: error: {message}", {})
        if self._error is None:  # an error the command stopped with says more: it stays
            self._error = {"message": message, "file": None}
        self._result = None
        self._findings = [f for f in self._findings if non_finite_problem(f) is None]
        return self._document(exit)


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
    """Structured results as YAML (what `expand` prints by default), the rest as text."""

    @property
    def progress(self) -> TextIO:
        return self.err  # stdout holds one YAML document

    def result(
        self,
        data: Any,
        text: Callable[[], str],
        findings: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        dump_yaml(data, self.out)


REPORTERS: dict[str, Callable[..., Reporter]] = {
    "text": TextReporter,
    "json": JsonReporter,
    "yaml": YamlReporter,
}


def reporter_for(fmt: str | None, command: str = "") -> Reporter:
    """The reporter for `--format FMT` (text when the command has no --format)."""
    return REPORTERS[fmt or "text"](command=command)
