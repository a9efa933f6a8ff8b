"""Every section the plan schema accepts goes through every command that reads a plan.

The sections are read from the schema itself: each object with properties, at any depth
(`$.power`, `$.racks.*.power.feeds[]`, `$.acceptance.history.tolerance`). The two plans in
sections/ (a Slurm plan and a Kubernetes plan) hold every one of them between them, so a
section added to the schema without a plan here fails the first test, and a section that
reaches the schema and not the expanded plan's contract fails the commands below (expand
refused `power` once: `plan sections outside the contract`, a traceback in every command
after `validate`, `lock` and `capacity`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import types
import typing
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import pytest
import yaml
from support.cli_output import envelope, result

from cluster_plan import cli
from cluster_plan.plan.contract import ExpandedPlan, conformance_errors
from cluster_plan.plan.schema import plan_schema

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PLANS = sorted((HERE / "sections").glob("*.yml"))
BIN = Path(sys.executable).parent
# Keys of the plan file that are not the cluster's: the inventory marker and format version,
# suppressions of findings, and Ansible's constructed-inventory options.
NOT_CLUSTER = {"plugin", "version", "suppress", "compose", "groups", "keyed_groups", "strict",
               "leading_separator", "use_extra_vars"}  # fmt: skip


def schema_sections() -> set[str]:
    """The path of every object of the schema that has properties: `*` for a mapping's
    values, `[]` for a list's items; oneOf/anyOf branches and $refs followed."""
    schema = plan_schema()
    found: set[str] = set()

    def walk(node: Any, path: str, seen: tuple[str, ...]) -> None:
        while isinstance(node, dict) and "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[1]
            if name in seen:
                return
            node, seen = schema["$defs"][name], (*seen, name)
        if not isinstance(node, dict):
            return
        if "properties" in node:
            found.add(path)
        for key, sub in node.get("properties", {}).items():
            walk(sub, f"{path}.{key}", seen)
        for branch in (*node.get("oneOf", ()), *node.get("anyOf", ())):
            walk(branch, path, seen)
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], f"{path}.*", seen)
        if isinstance(node.get("items"), dict):
            walk(node["items"], f"{path}[]", seen)

    walk(schema, "$", ())
    return found


def written_paths(data: Any, path: str = "$") -> set[str]:
    """Every path a plan writes, in schema_sections' notation with the names kept."""
    out = {path}
    if isinstance(data, dict):
        for key, value in data.items():
            out |= written_paths(value, f"{path}.{key}")
    elif isinstance(data, list):
        for value in data:
            out |= written_paths(value, f"{path}[]")
    return out


def _matches(section: str, written: set[str]) -> bool:
    pattern = re.compile("^" + re.escape(section).replace(r"\*", r"[^.\[]+") + "$")
    return any(pattern.match(path) for path in written)


def test_the_section_plans_hold_every_section_of_the_schema():
    sections = schema_sections()
    assert {"$.power", "$.racks.*.power.feeds[]", "$.acceptance.history.tolerance"} <= sections
    assert len(sections) > 50
    written: set[str] = set()
    for plan in PLANS:
        written |= written_paths(yaml.safe_load(plan.read_text()))
    missing = sorted(s for s in sections if not _matches(s, written))
    assert missing == [], f"sections no plan in {HERE / 'sections'} writes: {missing}"
    top = set(plan_schema()["properties"])
    assert top <= {p.split(".")[1] for p in written if p.count(".") == 1}


# What expand reshapes on purpose: an access switch's `rack` is read as `racks: [rack]`.
RESHAPED = {"$.topology.access.*.rack"}


def _bare(kind: Any) -> Any:
    """X for Required[X], NotRequired[X] and X | None."""
    while True:
        origin = get_origin(kind)
        if origin in (typing.Required, typing.NotRequired):
            kind = get_args(kind)[0]
        elif origin in (Union, types.UnionType) and type(None) in get_args(kind):
            others = [k for k in get_args(kind) if k is not type(None)]
            if len(others) != 1:
                return kind
            kind = others[0]
        else:
            return kind


def contract_gaps(node: Any, kind: Any, path: str) -> list[str]:
    """Keys the schema accepts under ``path`` that the contract's ``kind`` has no place for
    (a mapping of Any takes a section whole, as the plan writes it)."""
    schema = plan_schema()
    while isinstance(node, dict) and "$ref" in node:
        node = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
    kind = _bare(kind)
    if kind is Any or not isinstance(node, dict):
        return []
    properties = dict(node.get("properties", {}))
    for branch in (*node.get("oneOf", ()), *node.get("anyOf", ())):
        properties.update(branch.get("properties", {}) if isinstance(branch, dict) else {})
    gaps: list[str] = []
    if isinstance(kind, type) and typing.is_typeddict(kind):
        hints = typing.get_type_hints(kind)
        for key, sub in properties.items():
            where = f"{path}.{key}"
            if key in hints:
                gaps += contract_gaps(sub, hints[key], where)
            elif where not in RESHAPED and not (path == "$" and key in NOT_CLUSTER):
                gaps.append(f"{where}: {kind.__name__} has no key {key!r}")
    elif get_origin(kind) is dict and get_args(kind)[1] is Any:
        pass  # the section as the plan writes it
    elif get_origin(kind) is dict and isinstance(node.get("additionalProperties"), dict):
        gaps += contract_gaps(node["additionalProperties"], get_args(kind)[1], f"{path}.*")
    elif get_origin(kind) is list and isinstance(node.get("items"), dict):
        gaps += contract_gaps(node["items"], get_args(kind)[0], f"{path}[]")
    elif properties:
        gaps.append(f"{path}: the schema has a section here, the contract {kind!r}")
    return gaps


def test_every_key_of_the_schema_has_a_place_in_the_contract():
    assert contract_gaps(plan_schema(), ExpandedPlan, "$") == []


def test_the_contract_walk_finds_a_missing_key():
    class Lean(typing.TypedDict):
        cluster: dict[str, Any]

    gaps = contract_gaps(plan_schema(), Lean, "$")
    assert "$.power: Lean has no key 'power'" in gaps
    assert not any(gap.startswith("$.cluster.") for gap in gaps)  # a mapping of Any


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err, argv
    return code, out, err


@pytest.fixture(params=PLANS, ids=lambda p: p.stem)
def locked(request: pytest.FixtureRequest, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    plan = tmp_path / request.param.name
    shutil.copy(request.param, plan)
    code, _, err = run(capsys, "lock", str(plan))
    assert code == 0, err
    return plan


def test_validate_and_capacity(locked, capsys):
    code, out, err = run(capsys, "validate", "--format", "json", str(locked))
    (report,) = result(out)
    assert code == 0, err
    assert [f for f in report["findings"] if not f["suppressed_by"]] == []
    code, out, err = run(capsys, "capacity", "--format", "json", str(locked))
    assert code == 0, err
    assert envelope(out)["status"] == "ok"


def test_expand_carries_every_section_in_the_contract(locked, capsys):
    code, out, err = run(capsys, "expand", "--format", "json", str(locked))
    assert code == 0, err
    expanded = result(out)
    assert conformance_errors(expanded, ExpandedPlan) == []
    plan = yaml.safe_load(locked.read_text())
    for section in set(plan) - NOT_CLUSTER:
        assert expanded.get(section) is not None, section


@pytest.mark.parametrize("command", [["graph"], ["audit"], ["monitoring", "render"],
                                     ["k8s", "render"]])  # fmt: skip
def test_the_plan_views_read_it(locked, capsys, command):
    plan = yaml.safe_load(locked.read_text())
    code, out, err = run(capsys, *command, str(locked))
    if command[0] == "k8s" and plan["scheduler"]["type"] != "kubernetes":
        assert (code, "error[not-kubernetes]" in err) == (1, True)  # no objects to render
        return
    assert code == 0, err
    assert out


def test_diff_reads_it(locked, capsys):
    code, out, err = run(capsys, "diff", "--format", "json", str(locked), str(locked))
    assert code == 0, err
    assert result(out) == []
    # the power and cooling settings are validate's: a change of them touches no host
    other = locked.with_name("other.yml")
    other.write_text(locked.read_text().replace("power: {typical_load_pct: 80}", "power: {}"))
    other.write_text(other.read_text().replace("  typical_load_pct: 70\n", ""))
    shutil.copy(locked.with_name(locked.stem + ".lock.json"), other.with_name("other.lock.json"))
    lock = json.loads(other.with_name("other.lock.json").read_text())
    lock["plan"]["file"] = other.name
    other.with_name("other.lock.json").write_text(json.dumps(lock))
    code, out, err = run(capsys, "diff", "--format", "json", str(locked), str(other))
    assert code == 0, err
    changes = result(out)
    assert [(c["path"], c["impact"]) for c in changes] == [("$.power.typical_load_pct", "none")]


def test_the_inventory_plugin_reads_it(locked):
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    env["ANSIBLE_CACHE_PLUGIN_CONNECTION"] = str(ROOT / ".cache" / "no-facts")
    proc = subprocess.run(
        [str(BIN / "ansible-inventory"), "-i", str(locked), "--list"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    listed = json.loads(proc.stdout)
    lock = json.loads(locked.with_name(locked.stem + ".lock.json").read_text())
    assert set(listed["_meta"]["hostvars"]) == set(lock["networks"]["mgmt"]["hosts"])
