"""Not-a-number and infinity are refused wherever the plan or its lock is read: `.nan` passes
every minimum and maximum of the schema (each comparison with NaN is false), so a budget check
would skip the value and an alert rule would never fire."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cluster_plan import cli
from cluster_plan.plan.findings import format_path
from cluster_plan.plan.lockfile import read_lock, write_lock
from cluster_plan.plan.validate import validate_text

ROOT = Path(__file__).resolve().parents[2]
PLANS = [ROOT / "inventory" / "lab" / "cluster.yml", ROOT / "tests" / "plans" / "base.yml"]


def numbers(text: str) -> list[tuple[tuple[object, ...], int, int]]:
    """(path, start, end offset) of every plain number of a YAML document."""
    found: list[tuple[tuple[object, ...], int, int]] = []

    def walk(node: yaml.Node, path: tuple[object, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                walk(value, (*path, key.value))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, (*path, i))
        elif node.tag.endswith((":int", ":float")) and not node.style:
            found.append((path, node.start_mark.index, node.end_mark.index))

    walk(yaml.compose(text, Loader=yaml.SafeLoader), ())
    return found


CASES = [
    (plan, path, start, end)
    for plan in PLANS
    for path, start, end in numbers(plan.read_text())
    if not str(path[0]).startswith("x-")
]


def test_the_plans_hold_many_numbers():
    assert len(CASES) > 60


@pytest.mark.parametrize("written", [".nan", ".inf", "-.Inf", "1.0e+999"])
def test_every_number_of_a_plan_refuses_a_non_finite_value(written):
    missed = []
    for plan, path, start, end in CASES:
        text = plan.read_text()
        result = validate_text(text[:start] + written + text[end:], "plan.yml")
        found = [f for f in result.findings if f.code == "not-finite"]
        if [(f.json_path, f.severity) for f in found] != [(format_path(path), "error")]:
            missed.append((plan.name, format_path(path), [f.json_path for f in found]))
        elif found[0].line is None or found[0].hint is None:
            missed.append((plan.name, format_path(path), "unlocated"))
    assert missed == []


def test_commands_refuse_a_plan_with_nan_before_they_compute(tmp_path, capsys):
    base = (ROOT / "tests" / "plans" / "bad" / "power-w-nan.yml").read_bytes()
    plan = tmp_path / "p.yml"
    plan.write_bytes(base)
    for argv in (["capacity", str(plan)], ["lock", str(plan)], ["expand", str(plan)]):
        code = cli.main(argv)
        out, err = capsys.readouterr()
        assert code == 1, argv
        assert "error[not-finite]" in err
        assert "nan %" not in out and "Traceback" not in err
    assert not (tmp_path / "p.lock.json").exists()


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_a_lock_with_a_non_finite_number_is_refused(tmp_path, constant):
    path = tmp_path / "p.lock.json"
    lock = {"version": 3, "networks": {"mgmt": {"cidr": "10.0.0.0/24", "hosts": {}}}}
    write_lock(path, lock)
    assert read_lock(path) == (lock, None)
    path.write_text(json.dumps(lock)[:-1] + f', "note": {constant}}}')
    refused, finding = read_lock(path)
    assert refused is None
    assert finding is not None and finding.code == "lock-unreadable"
    assert constant in finding.message
