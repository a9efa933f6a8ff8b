"""Read a plan file into plain data, remembering where every key and value came from.

PyYAML silently keeps the last of two duplicate keys; a plan must not, so the node tree is
composed first and turned into data here, with duplicates reported as findings.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cluster_plan.plan.findings import Finding, JsonPath
from cluster_plan.plan.input_files import InputError, decode_text, open_regular
from cluster_plan.plan.secrets import mask

try:  # the C loader is several times faster on large plans
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

MAX_PLAN_BYTES = 16 * 1024 * 1024
_MERGE_TAG = "tag:yaml.org,2002:merge"
MAX_DEPTH = 64  # a plan is a few levels deep; anything near this is junk
MAX_ALIAS_VALUES = 250_000
# YAML 1.1 reads a plain 0-prefixed number as octal: `uid: 02001` is 1025, silently.
_OCTAL = re.compile(r"^[-+]?0[0-7_]+$")
EXTENSION_PREFIX = "x-"
# `.nan` and `.inf` are YAML floats that pass every minimum and maximum of the schema (every
# comparison with NaN is false): a budget check would skip the value, a rule would never fire.
_NON_FINITE = {True: "not a number (NaN)", False: "infinite"}


@dataclass
class PlanDocument:
    """A loaded plan: its data, and the line/column of each path (1-based)."""

    file: str
    text: str
    data: Any
    positions: dict[JsonPath, tuple[int, int]] = field(default_factory=dict)
    key_positions: dict[JsonPath, tuple[int, int]] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    secrets: frozenset[str] = frozenset()  # values of the schema's writeOnly fields
    _shown: tuple[frozenset[str], list[str]] | None = field(default=None, repr=False)

    @property
    def source_lines(self) -> list[str]:
        """The plan's lines as findings quote them: secrets masked (worked out once for the
        secrets known; every finding of a plan reads them)."""
        if self._shown is None or self._shown[0] != self.secrets:
            self._shown = (
                self.secrets,
                [mask(line, self.secrets) for line in self.text.splitlines()],
            )
        return list(self._shown[1])

    def locate(self, path: JsonPath, *, key: bool = False) -> tuple[int, int] | None:
        """Position of ``path``, or of its nearest ancestor that has one."""
        probe = tuple(path)
        while True:
            table = self.key_positions if key and probe in self.key_positions else self.positions
            if probe in table:
                return table[probe]
            if not probe:
                return None
            probe = probe[:-1]

    def place(self, finding: Finding, *, key: bool = False) -> Finding:
        pos = self.locate(finding.path, key=key)
        line, col = pos if pos else (None, None)
        return finding.located(self.file, line, col)


def _without_zeros(number: str) -> str:
    """A zero-padded YAML integer as the decimal its writer meant: -012 -> -12."""
    sign = number[0] if number[0] in "+-" else ""
    return sign + (number[len(sign) :].lstrip("0") or "0")


def _shown(value: str, width: int = 40) -> str:
    """A value quoted for a message, cut short: one line even for a 5,000-digit number."""
    return repr(value if len(value) <= width else value[:width] + "...")


def _value_error(node: yaml.Node, problem: str) -> yaml.YAMLError:
    return yaml.constructor.ConstructorError(None, None, problem, node.start_mark)


class _Builder:
    def __init__(self, doc: PlanDocument) -> None:
        self.doc = doc
        self.constructor = yaml.constructor.SafeConstructor()
        self.built: set[int] = set()  # collections built once; meeting one again is an alias
        self.active: set[int] = set()  # collections being built now (an alias to one is a cycle)
        self.alias_values = 0

    def build(self, node: yaml.Node, path: JsonPath) -> Any:
        self.doc.positions[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
        if not isinstance(node, yaml.MappingNode | yaml.SequenceNode):
            try:
                value = self.constructor.construct_object(node, deep=True)
            except (ValueError, OverflowError) as exc:  # e.g. 2027-13-45 is read as a date
                reason = str(exc).split(";")[0]  # not Python's advice to raise its limit
                raise _value_error(node, f"cannot read {_shown(node.value)}: {reason}") from None
            # a plain scalar: libyaml's style is '', PyYAML's None
            plain = isinstance(node, yaml.ScalarNode) and not node.style
            if type(value) is int and plain and _OCTAL.match(node.value):
                self._finding(
                    "octal-number",
                    f"{node.value} has a leading zero, so YAML reads it as octal: {value}",
                    path,
                    node,
                    hint=f"write {_without_zeros(node.value)} without the zero, or quote it "
                    "if it is text",
                )
            if type(value) is float and not math.isfinite(value):
                self._finding(
                    "not-finite",
                    f"{_shown(node.value)} is {_NON_FINITE[math.isnan(value)]}; the plan's "
                    "numbers must be finite",
                    path,
                    node,
                    hint="write the number, or leave the key out for its default (YAML reads "
                    ".nan and .inf, in any case, and numbers past 1.8e308 so)",
                )
            return value
        # Aliases share nodes: a cycle would recurse forever and a "billion laughs" plan
        # would expand forever, so both, and absurd nesting, stop with a finding.
        if id(node) in self.active:
            raise _value_error(node, "an alias refers to a value that contains it")
        if len(path) > MAX_DEPTH:
            raise _value_error(node, f"the plan nests deeper than {MAX_DEPTH} levels")
        if id(node) in self.built:
            self.alias_values += len(node.value)
            if self.alias_values > MAX_ALIAS_VALUES:
                raise _value_error(node, f"aliases expand to more than {MAX_ALIAS_VALUES} values")
        self.built.add(id(node))
        self.active.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                return self._mapping(node, path)
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        finally:
            self.active.discard(id(node))

    def _mapping(self, node: yaml.MappingNode, path: JsonPath) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        merged: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                value = self.build(value_node, path)
                for item in value if isinstance(value, list) else [value]:
                    if isinstance(item, dict):
                        merged.update({k: v for k, v in item.items() if k not in merged})
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                self._finding("complex-key", "a mapping key must be a plain scalar", path, key_node)
                continue
            key = self.constructor.construct_object(key_node)
            if not isinstance(key, str):
                key = str(key)
            child = (*path, key)
            if key in result:
                first = self.doc.key_positions[child]
                self._finding(
                    "duplicate-key",
                    f"key {key!r} appears twice in this mapping (first on line {first[0]})",
                    child,
                    key_node,
                    hint="YAML keeps only the last value silently; remove or rename one of them",
                )
                continue
            self.doc.key_positions[child] = (
                key_node.start_mark.line + 1,
                key_node.start_mark.column + 1,
            )
            result[key] = self.build(value_node, child)
        for key, value in merged.items():
            result.setdefault(key, value)
        return result

    def _finding(
        self, code: str, message: str, path: JsonPath, node: yaml.Node, hint: str | None = None
    ) -> None:
        self.doc.findings.append(
            Finding(
                code,
                message,
                path,
                hint=hint,
                file=self.doc.file,
                line=node.start_mark.line + 1,
                column=node.start_mark.column + 1,
            )
        )


def _fail(
    file: str,
    code: str,
    message: str,
    line: int | None = None,
    column: int | None = None,
    hint: str | None = None,
    text: str = "",
) -> PlanDocument:
    doc = PlanDocument(file=file, text=text, data=None)
    doc.findings.append(Finding(code, message, (), hint=hint, file=file, line=line, column=column))
    return doc


def parse_plan_text(raw: bytes | str, file: str) -> PlanDocument:
    """Parse plan text; problems become findings on the returned document, never exceptions."""
    text = _decode(raw, file) if isinstance(raw, bytes) else raw
    if isinstance(text, PlanDocument):
        return text
    root = _root(text, file)
    if isinstance(root, PlanDocument):
        return root
    doc = PlanDocument(file=file, text=text, data=None)
    if not isinstance(root, yaml.MappingNode):
        kind = "a list" if isinstance(root, yaml.SequenceNode) else "a single value"
        doc.findings.append(
            Finding(
                "not-a-mapping",
                f"the top level of a plan must be a mapping, not {kind}",
                (),
                file=file,
                line=root.start_mark.line + 1,
                column=root.start_mark.column + 1,
                hint="a plan starts with keys such as 'plugin:' and 'cluster:'",
            )
        )
        return doc
    _build(doc, root)
    return doc


def _decode(raw: bytes, file: str) -> str | PlanDocument:
    """The plan's bytes as text, or a document holding why they are not a plan's text."""
    if len(raw) > MAX_PLAN_BYTES:
        return _fail(
            file,
            "plan-too-large",
            f"the plan is {len(raw)} bytes; the limit is {MAX_PLAN_BYTES}",
            hint="a plan describes node groups, not every node",
        )
    try:
        return decode_text(raw, file, expected="YAML")
    except InputError as exc:
        return _fail(file, exc.code, exc.problem)


def _blank(text: str) -> bool:
    """Nothing but blank lines and comments."""
    return all(not line.strip() or line.lstrip().startswith("#") for line in text.splitlines())


def _root(text: str, file: str) -> yaml.Node | PlanDocument:
    """The plan's one YAML document, composed; or a document holding why there is none."""
    if not text.strip() or _blank(text):
        return _fail(
            file,
            "empty-plan",
            "the plan is empty",
            text=text,
            hint="start from inventory/lab/cluster.yml or inventory/examples/",
        )
    try:
        nodes = [n for n in yaml.compose_all(text, Loader=_Loader) if n is not None]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        context = f" ({exc.context})" if exc.context else ""
        return _fail(
            file,
            "yaml-syntax",
            f"YAML syntax error: {exc.problem or 'invalid YAML'}{context}",
            mark.line + 1 if mark else None,
            mark.column + 1 if mark else None,
            text=text,
            hint="check indentation and quoting on this line",
        )
    except yaml.YAMLError as exc:
        return _fail(file, "yaml-syntax", f"YAML error: {exc}", text=text)
    if not nodes:
        return _fail(file, "empty-plan", "the plan is empty", text=text)
    if len(nodes) > 1:
        second = nodes[1].start_mark
        return _fail(
            file,
            "multiple-documents",
            "the plan holds more than one YAML document",
            second.line + 1,
            second.column + 1,
            text=text,
            hint="a plan is one document; remove the extra '---'",
        )
    return nodes[0]


def _build(doc: PlanDocument, root: yaml.MappingNode) -> None:
    """The plan's data from its composed mapping, on `doc`; a value YAML cannot construct
    becomes a finding (and no data)."""
    try:
        data = _Builder(doc).build(root, ())
        # Top-level `x-` keys hold YAML anchors for the rest of the plan (the Compose
        # convention); the anchors are resolved by now, so the keys are not part of the plan.
        doc.data = {k: v for k, v in data.items() if not k.startswith(EXTENSION_PREFIX)}
    except yaml.YAMLError as exc:  # e.g. a malformed timestamp or an unknown tag
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        doc.findings.append(
            Finding(
                "yaml-value",
                f"cannot read a value: {problem}",
                (),
                file=doc.file,
                line=mark.line + 1 if mark else None,
                column=mark.column + 1 if mark else None,
            )
        )
        doc.data = None


def load_plan_file(path: str | Path) -> PlanDocument:
    """Read and parse a plan file; an unreadable file is a finding too."""
    name = str(path)
    try:  # a regular file only (a FIFO would hang), and no more than the limit
        with open_regular(path) as handle:
            raw = handle.read(MAX_PLAN_BYTES + 1)
    except InputError as exc:
        return _fail(name, exc.code, exc.problem)
    except OSError as exc:
        return _fail(name, "unreadable", f"cannot read the file: {exc.strerror}")
    return parse_plan_text(raw, name)
