"""Every plan under inventory/: it passes check-jsonschema and `cluster-plan validate`, and
`cluster-plan expand --format json` equals its golden file in golden/.

Regenerate the golden files after an intended change with
    UPDATE_GOLDEN=1 .venv/bin/pytest tests/plans/test_golden.py
and review the diff before committing it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.cli_output import result

from cluster_plan import cli

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "golden"
SCHEMA = ROOT / "schemas" / "cluster-plan.schema.json"
PLANS = sorted(
    p
    for p in (ROOT / "inventory").rglob("*.y*ml")
    if p.suffix in (".yml", ".yaml") and not p.name.startswith(".")
)
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def golden_name(plan: Path) -> str:
    # inventory/lab/cluster.yml -> lab; inventory/examples/slurm-h100.yml -> slurm-h100
    return plan.parent.name if plan.stem == "cluster" else plan.stem


def plan_id(plan: Path) -> str:
    return str(plan.relative_to(ROOT))


def dump_golden(data: dict[str, Any]) -> str:
    """JSON with one top-level key, and one host, per line: diffs stay readable for big plans."""

    def compact(value: Any) -> str:
        return json.dumps(value, separators=(",", ":"))

    lines = ["{"]
    items = list(data.items())
    for i, (key, value) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        if key == "hosts" and isinstance(value, dict) and value:
            lines.append(f"{compact(key)}:{{")
            hosts = list(value.items())
            lines.extend(
                f"{compact(name)}:{compact(host)}{',' if j < len(hosts) - 1 else ''}"
                for j, (name, host) in enumerate(hosts)
            )
            lines.append("}" + comma)
        else:
            lines.append(f"{compact(key)}:{compact(value)}{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def test_there_are_plans_and_their_golden_names_are_distinct():
    assert ROOT / "inventory" / "lab" / "cluster.yml" in PLANS
    names = [golden_name(p) for p in PLANS]
    assert len(names) == len(set(names))


def test_no_golden_file_without_a_plan():
    expected = {f"{golden_name(p)}.expanded.json" for p in PLANS}
    assert {p.name for p in GOLDEN.glob("*.json")} <= expected


@pytest.mark.parametrize("plan", PLANS, ids=plan_id)
def test_plan_validates(capsys, plan):
    code = cli.main(["validate", "--format", "json", str(plan)])
    out, err = capsys.readouterr()
    (report,) = result(out)
    assert [f for f in report["findings"] if f["suppressed_by"] is None] == []
    assert code == 0
    # every suppression in a shipped plan gives its reason
    assert all(f["suppressed_by"] and f["suppressed_by"] != "None" for f in report["findings"])
    assert "Traceback" not in err


def test_plans_pass_check_jsonschema():
    exe = ROOT / ".venv" / "bin" / "check-jsonschema"
    command = [str(exe)] if exe.exists() else [sys.executable, "-m", "check_jsonschema"]
    if not exe.exists() and shutil.which("check-jsonschema"):
        command = ["check-jsonschema"]
    proc = subprocess.run(
        [*command, "--schemafile", str(SCHEMA), *map(str, PLANS)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("plan", PLANS, ids=plan_id)
def test_expand_matches_golden(capsys, plan):
    code = cli.main(["expand", "--format", "json", str(plan)])
    out, err = capsys.readouterr()
    assert code == 0, err
    expanded = result(out)
    golden = GOLDEN / f"{golden_name(plan)}.expanded.json"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        golden.write_text(dump_golden(expanded))
    assert golden.exists(), f"no golden file for {plan}; run with UPDATE_GOLDEN=1"
    recorded = json.loads(golden.read_text())
    assert list(expanded["hosts"]) == list(recorded["hosts"])  # host order is part of it
    for name, host in recorded["hosts"].items():
        assert expanded["hosts"][name] == host, name
    assert expanded == recorded


def test_dump_golden_round_trips():
    data = {"a": [1, {"b": None}], "hosts": {"x": {"k": "v"}, "y": {}}, "z": "é"}
    assert json.loads(dump_golden(data)) == data
    assert list(json.loads(dump_golden(data))["hosts"]) == ["x", "y"]
