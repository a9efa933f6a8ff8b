"""The expanded plan's contract (cluster_plan/plan/contract.py) holds for every expansion, and
docs/expanded-data.md documents every key of it."""

from __future__ import annotations

import copy
import json
import re
import typing
from pathlib import Path
from typing import Any, get_args, get_origin

import pytest

from cluster_plan.api import load_expanded
from cluster_plan.plan.contract import ExpandedPlan, conformance_errors

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = sorted((ROOT / "tests" / "plans" / "golden").glob("*.expanded.json"))
DOC = (ROOT / "docs" / "expanded-data.md").read_text()


def typed_dicts(kind: Any, seen: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every TypedDict reachable from ``kind``, by name."""
    seen = {} if seen is None else seen
    if isinstance(kind, type) and typing.is_typeddict(kind):
        if kind.__name__ in seen:
            return seen
        seen[kind.__name__] = kind
        for hint in typing.get_type_hints(kind).values():
            typed_dicts(hint, seen)
    elif get_origin(kind) is not None:
        for arg in get_args(kind):
            typed_dicts(arg, seen)
    return seen


@pytest.mark.parametrize("golden", GOLDEN, ids=lambda p: p.name)
def test_every_golden_expansion_is_the_contract_shape(golden):
    data = json.loads(golden.read_text())
    assert conformance_errors(data, ExpandedPlan) == []


def test_a_fresh_expansion_is_the_contract_shape():
    assert conformance_errors(load_expanded(ROOT / "inventory/lab/cluster.yml"), ExpandedPlan) == []


def test_conformance_finds_what_is_off():
    data = json.loads(GOLDEN[0].read_text())
    broken = copy.deepcopy(data)
    del broken["lab"]
    host = next(iter(broken["hosts"]))
    broken["hosts"][host]["cpu_cores"] = "two"
    broken["networks"][next(iter(broken["networks"]))]["mtu"] = None
    broken["acceptance"]["surprise"] = 1
    errors = " ".join(conformance_errors(broken, ExpandedPlan))
    assert "lacks 'lab'" in errors
    assert f"$.hosts.{host}.cpu_cores: expected an integer" in errors
    assert ".mtu: expected an integer" in errors
    assert "has no key 'surprise'" in errors


def test_the_documentation_names_every_type_and_key():
    for name, kind in typed_dicts(ExpandedPlan).items():
        section = re.search(rf"^### `{name}`\n(.*?)(?=^### |\Z)", DOC, re.M | re.S)
        assert section, f"docs/expanded-data.md has no section ### `{name}`"
        for key in typing.get_type_hints(kind):
            assert re.search(rf"^\| `{key}` \|", section.group(1), re.M), (
                f"{name}.{key} undocumented"
            )
