"""Every value of a sound plan replaced by junk, or deleted: validation never raises, its
findings print, and when the junk still fits the schema each points into the plan."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster_plan.load import PlanDocument
from cluster_plan.validate import validate_document

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
        result = validate_document(PlanDocument("plan.yml", "", data), check_lock=False)
        schema_clean = not {f.code for f in result.findings} & SCHEMA_CODES
        for finding in result.findings:
            assert finding.render()
            json.dumps(finding.as_dict())
            if schema_clean:  # the path, or the mapping that lacks its last key
                assert resolves(data, finding.path[:-1]), (junk, finding.render())
