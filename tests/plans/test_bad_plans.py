"""The bad-plan corpus: every plan under bad/ gives exactly the findings listed in
bad/expected.yaml (code, JSON path, severity, line, hint), through the CLI, never a traceback.

Each bad plan is base.yml with one fault; base.yml itself is sound and gives no finding at all,
so any error a bad plan gives comes from its fault.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli_output import result

from cluster_plan import cli

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BAD = HERE / "bad"
MANIFEST: dict[str, list[dict[str, Any]]] = yaml.safe_load((BAD / "expected.yaml").read_text())
# Input that is not a plan at all (not text) is a usage error, exit 2; a plan that fails a
# check is exit 1.
UNREADABLE = {"binary-junk.yml", "latin1.yml"}
CLUSTER_PLAN = [str(ROOT / ".venv" / "bin" / "cluster-plan")]
if not Path(CLUSTER_PLAN[0]).exists():  # an installed package, not this checkout's venv
    CLUSTER_PLAN = [sys.executable, "-m", "cluster_plan"]


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:  # argparse
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def expected_exit(name: str) -> int:
    if name in UNREADABLE:
        return 2
    return 1 if any(e.get("severity", "error") == "error" for e in MANIFEST[name]) else 0


def test_the_corpus_is_large_and_fully_described():
    on_disk = {p.name for p in BAD.iterdir() if p.suffix == ".yml"}
    assert on_disk == set(MANIFEST)
    failing = [name for name in MANIFEST if expected_exit(name) != 0]
    assert len(failing) >= 45
    codes = {e["code"] for entries in MANIFEST.values() for e in entries}
    assert len(codes) >= 40  # the corpus covers many distinct checks, not one check many times
    for name, entries in MANIFEST.items():
        assert entries, name
        for entry in entries:
            assert set(entry) <= {"code", "path", "severity", "line", "hint"}, name
            assert entry["path"].startswith("$"), name


def test_the_base_plan_is_sound(capsys):
    code, out, _ = run_cli(
        capsys, "validate", "--no-lock", "--format", "json", str(HERE / "base.yml")
    )
    (report,) = result(out)
    assert report["findings"] == []
    assert code == 0
    assert report["nodes"] == 7


def _report(capsys, name: str) -> tuple[int, dict[str, Any], str]:
    path = str(BAD / name)
    # absurd input is refused, not worked through (count: 10000000, huge widths, ...): the
    # findings below are the proof; each plan's time is a figure in benchmarks/bench_limits.py
    code, out, err = run_cli(capsys, "validate", "--no-lock", "--format", "json", path)
    assert "Traceback" not in out + err
    (report,) = result(out)
    assert report["file"] == path
    return code, report, path


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_bad_plan(capsys, name):
    code, report, path = _report(capsys, name)
    shown = [f for f in report["findings"] if f["suppressed_by"] is None]
    for expected in MANIFEST[name]:
        severity = expected.get("severity", "error")
        matches = [
            f
            for f in shown
            if f["code"] == expected["code"]
            and f["path"] == expected["path"]
            and f["severity"] == severity
        ]
        assert matches, (
            f"{name}: no {severity} {expected['code']} at {expected['path']}: "
            f"{[(f['code'], f['path']) for f in shown]}"
        )
        finding = matches[0]
        assert finding["file"] == path
        assert finding["message"]
        if "line" in expected:
            assert finding["line"] == expected["line"], f"{name}: {finding}"
            assert finding["column"] >= 1
        if "hint" in expected:
            assert expected["hint"] in (finding["hint"] or ""), f"{name}: {finding}"
    listed = {(e["code"], e["path"]) for e in MANIFEST[name]}
    unexpected = [
        f for f in shown if f["severity"] == "error" and (f["code"], f["path"]) not in listed
    ]
    assert not unexpected, f"{name}: unexpected errors {unexpected}"
    assert report["ok"] is (expected_exit(name) == 0)
    assert code == expected_exit(name)


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_bad_plan_text_output_points_at_the_line(capsys, name):
    path = str(BAD / name)
    code, out, err = run_cli(capsys, "validate", "--no-lock", path)
    assert "Traceback" not in out + err
    assert code == expected_exit(name)
    for expected in MANIFEST[name]:
        where = f"{path}:{expected['line']}:" if "line" in expected else f"{path}"
        severity = expected.get("severity", "error")
        heads = [
            line
            for line in err.splitlines()
            if line.startswith(where) and f"{severity}[{expected['code']}]" in line
        ]
        assert any(f" {expected['path']}: " in head for head in heads), f"{name}:\n{err}"
    if any("line" in e for e in MANIFEST[name]):
        assert "^" in err  # the caret under the offending column
    status = "ok" if expected_exit(name) == 0 else "FAILED"
    assert f"{path}: {status}:" in err


@pytest.mark.parametrize("name", sorted(n for n in MANIFEST if expected_exit(n) == 0))
def test_warnings_fail_under_strict(capsys, name):
    code, _, err = run_cli(capsys, "validate", "--no-lock", "--strict", str(BAD / name))
    assert code == 1
    assert "Traceback" not in err


def test_the_other_commands_refuse_bad_plans_too(capsys, tmp_path):
    for name in ("network-overlap.yml", "duplicate-key-nested.yml", "empty.yml"):
        plan = tmp_path / name
        plan.write_bytes((BAD / name).read_bytes())
        for command in ("lock", "expand"):
            code, _, err = run_cli(capsys, command, str(plan))
            assert code == 1, (command, name, err)
            assert "Traceback" not in err
            assert MANIFEST[name][0]["code"] in err
        assert not (tmp_path / (plan.stem + ".lock.json")).exists()
    for name in UNREADABLE:
        code, _, err = run_cli(capsys, "expand", str(BAD / name))
        assert code == 2
        assert "not-text" in err


def test_unreadable_paths(capsys, tmp_path):
    code, _, err = run_cli(capsys, "validate", str(tmp_path / "missing.yml"))
    assert code == 2
    assert "file-not-found" in err
    code, _, err = run_cli(capsys, "validate", str(tmp_path))
    assert code == 2
    assert "not-a-file" in err
    # several plans: each is reported, and the run fails
    code, _, err = run_cli(
        capsys,
        "validate",
        "--no-lock",
        str(tmp_path / "missing.yml"),
        str(BAD / "network-overlap.yml"),
    )
    assert code in (1, 2)
    assert "file-not-found" in err
    assert "network-overlap" in err


def test_binary_junk_written_by_the_test(capsys, tmp_path):
    junk = tmp_path / "junk.yml"
    junk.write_bytes(bytes(range(256)) * 8)
    code, _, err = run_cli(capsys, "validate", str(junk))
    assert (code, "not-text" in err, "Traceback" in err) == (2, True, False)
    junk.write_bytes(b"plugin: cluster_plan\ncluster: {name: \xc3\x28}\n")  # invalid UTF-8
    code, _, err = run_cli(capsys, "validate", str(junk))
    assert (code, "not-text" in err, "Traceback" in err) == (2, True, False)


SAMPLE = [
    "yaml-syntax.yml",
    "empty.yml",
    "top-level-list.yml",
    "duplicate-key-top.yml",
    "unknown-key-nested.yml",
    "absurd-count.yml",
    "binary-junk.yml",
    "multiple-documents.yml",
    "pin-outside.yml",
    "rack-two-switches.yml",
]


@pytest.mark.parametrize("name", SAMPLE)
def test_bad_plan_through_the_installed_command(name):
    """The real executable, in a fresh process: exit status and stderr as a user sees them."""
    proc = subprocess.run(
        [*CLUSTER_PLAN, "validate", str(BAD / name)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "PYTHONWARNINGS": "error"},
    )
    assert proc.returncode == expected_exit(name), proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"[{MANIFEST[name][0]['code']}]" in proc.stderr
    assert proc.stdout == ""


LOAD_CODES = {
    "yaml-syntax",
    "empty-plan",
    "not-a-mapping",
    "multiple-documents",
    "duplicate-key",
    "yaml-value",
    "not-text",
}
# ("format" is the schema's grammar of a string, except at a reservation's start: that time
# check is the core's)
SCHEMA_CODES = {
    "type",
    "enum",
    "unknown-key",
    "missing-key",
    "range",
    "name",
    "empty",
    "duplicate-item",
    "value",
}
# check-jsonschema reads an unquoted timestamp as a string; the core reads it as YAML 1.1 does,
# as a date, and asks for quotes. A Kubernetes plan's version, and the API address of several
# control planes, are required by the renderer's rules (missing-key too), not by the schema.
CORE_STRICTER = {
    "reservation-start-unquoted.yml",
    "k8s-without-version.yml",
    "k8s-control-planes-without-vip.yml",
}


def _schema_finding(entry: dict[str, Any]) -> bool:
    if entry["code"] == "format":
        return not entry["path"].endswith(".start")
    return entry["code"] in SCHEMA_CODES


def test_check_jsonschema_agrees_on_which_plans_break_the_schema():
    """A plan CI lints with check-jsonschema fails there exactly when the core reports a
    schema finding: the schema file and the core's copy of it are the same rules."""
    names = sorted(n for n in MANIFEST if not {e["code"] for e in MANIFEST[n]} & LOAD_CODES)
    files = [str(HERE / "base.yml"), *(str(BAD / n) for n in names)]
    exe = ROOT / ".venv" / "bin" / "check-jsonschema"
    proc = subprocess.run(
        [
            str(exe) if exe.exists() else "check-jsonschema",
            "--schemafile",
            str(ROOT / "schemas" / "cluster-plan.schema.json"),
            "-o",
            "JSON",
            *files,
        ],
        capture_output=True,
        text=True,
        timeout=300,  # stops a hang only: 60 s ran out once on a loaded 2-core machine
    )
    report = json.loads(proc.stdout)
    assert report["parse_errors"] == []
    failed = {Path(e["filename"]).name for e in report["errors"]}
    expected = {n for n in names if any(_schema_finding(e) for e in MANIFEST[n])}
    expected -= CORE_STRICTER
    assert failed == expected


LAB = str(ROOT / "inventory" / "lab" / "cluster.yml")


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["validate"],
        ["frobnicate"],
        ["validate", "--format", "xml", LAB],
        ["expand", "--host", "nohost", LAB],
    ],
)
def test_usage_errors_exit_2(capsys, argv):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    assert "Traceback" not in out + err
    assert err
