"""Every value of a sound plan replaced by junk, or deleted: validation never raises, each
finding renders with its file, line and column, JSON path and code, and when the junk still
fits the schema each points into the plan."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster_plan.plan.findings import Finding
from cluster_plan.plan.validate import validate_text

BASE = Path(__file__).resolve().parents[1] / "plans" / "base.yml"
PLAN = yaml.safe_load(BASE.read_text())
DELETE = object()
# what the schema says; semantic checks on a plan that breaks the schema may point loosely
SCHEMA_CODES = {
    "type",
    "enum",
    "unknown-key",
    "missing-key",
    "range",
    "format",
    "name",
    "empty",
    "duplicate-item",
    "value",
    "schema-schema",
}
JUNK = [DELETE, None, "", -1, "x", [], {"a": 1}, ["r1"]]
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # the same text, five times faster


def paths(data: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if path:
        yield path
    if isinstance(data, dict):
        for key, value in data.items():
            yield from paths(value, (*path, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from paths(value, (*path, i))


def resolves(data: Any, path: tuple[Any, ...]) -> bool:
    for part in path:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return False
    return True


def assert_renders_where_and_what(finding: Finding, source_lines: list[str]) -> None:
    """The rendered finding names the file, the line:col it points at (with that source line
    and a caret under the column), the JSON path, the code and the message."""
    text = finding.render(source_lines)
    head, *rest = text.splitlines()
    assert finding.file == "plan.yml", text
    assert finding.line is not None and 0 < finding.line <= len(source_lines), text
    assert head.startswith(f"plan.yml:{finding.line}:{finding.column or 1}: "), text
    assert f"{finding.severity}[{finding.code}] {finding.json_path}: {finding.message}" in head
    assert rest[:2] == [
        "    " + source_lines[finding.line - 1],
        "    " + " " * ((finding.column or 1) - 1) + "^",
    ], text


@pytest.mark.parametrize("path", list(paths(PLAN)), ids=lambda p: ".".join(map(str, p)))
def test_junk_values_give_printable_findings_at_real_paths(path):
    for junk in JUNK:
        data = copy.deepcopy(PLAN)
        parent = data
        for part in path[:-1]:
            parent = parent[part]
        if junk is DELETE:
            del parent[path[-1]]
        else:
            parent[path[-1]] = copy.deepcopy(junk)
        text = yaml.dump(data, Dumper=DUMPER, sort_keys=False)
        result = validate_text(text, "plan.yml")
        schema_clean = not {f.code for f in result.findings} & SCHEMA_CODES
        for finding in result.findings:
            assert_renders_where_and_what(finding, text.splitlines())
            json.dumps(finding.as_dict())
            if schema_clean:  # the path, or the mapping that lacks its last key
                assert resolves(data, finding.path[:-1]), (junk, finding.render())
