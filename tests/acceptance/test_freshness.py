"""Acceptance on a re-run: skipped only when nothing it depends on changed since a passed
report (cluster_plan/acceptance/freshness.py), measured again otherwise."""

from __future__ import annotations

import copy
import datetime as dt
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cluster_plan.acceptance.freshness import FORCE_HINT, decide, inputs_fingerprint
from cluster_plan.acceptance.runner import PHASES
from cluster_plan.acceptance.spec import spec_from_expanded

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
WEEK = dt.timedelta(days=7)


def fingerprint(expanded: dict[str, Any]) -> str:
    return inputs_fingerprint(spec_from_expanded(expanded), PHASES)


def passed(inputs: str, age: dt.timedelta = dt.timedelta(hours=1)) -> dict[str, Any]:
    return {"passed": True, "inputs": inputs, "generated_at": (NOW - age).isoformat()}


def test_the_fingerprint_follows_what_acceptance_tests(expanded_lab: dict[str, Any]) -> None:
    base = fingerprint(expanded_lab)
    assert fingerprint(copy.deepcopy(expanded_lab)) == base
    assert inputs_fingerprint(spec_from_expanded(expanded_lab), ("latency",)) != base
    changes = {
        "an address": lambda e: e["hosts"]["gpu01"]["interfaces"]["compute"].update(
            address="10.20.0.99"
        ),
        "a threshold": lambda e: e["acceptance"]["network"].update(min_gbps=1.0),
        "a host's link": lambda e: e["hosts"]["cpu01"].update(link_gbps=1.0),
        "a removed host": lambda e: e["hosts"].pop("stor03"),
    }
    for what, change in changes.items():
        changed = copy.deepcopy(expanded_lab)
        change(changed)
        assert fingerprint(changed) != base, what


@pytest.mark.parametrize(
    ("previous", "changed_hosts", "run", "reason"),
    [
        (None, [], True, "no earlier report"),
        ({**passed("x"), "passed": False}, [], True, "the last run failed"),
        (passed("other"), [], True, "what acceptance tests changed"),
        (passed("x"), ["gpu02", "cpu01"], True, "network setup changed on cpu01, gpu02"),
        (passed("x", dt.timedelta(days=8)), [], True, "older than 7 day(s)"),
        ({**passed("x"), "generated_at": "yesterday"}, [], True, "older than"),
        (passed("x"), [], False, "nothing it depends on changed since 2026-11-30T11:00:00"),
    ],
    ids=["first", "failed", "inputs", "hosts", "old", "unreadable-date", "unchanged"],
)
def test_decide(
    previous: dict[str, Any] | None, changed_hosts: list[str], run: bool, reason: str
) -> None:
    decision = decide(previous, "x", now=NOW, max_age=WEEK, changed_hosts=changed_hosts)
    assert decision.run is run
    assert reason in decision.reason


def acceptance(
    expanded: Path, out: Path, *extra: str, prefix: str = "env", when: str = "changed"
) -> Any:
    gate = ["--when", when] if when else []  # "": the CLI's own default
    return subprocess.run(
        [sys.executable, "-m", "cluster_plan.cli", "acceptance", "unused.yml",
         "--expanded", str(expanded), "--transport", "exec", "--exec-prefix", prefix,
         "--phases", "latency", "--no-retest", "--probes", "100", "--output-dir", str(out),
         *gate, *extra],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_the_command_skips_only_an_unchanged_passed_run(
    tmp_path: Path, expanded_lab: dict[str, Any]
) -> None:
    """Real fping between loopback addresses (127.0.0.0/8 only), as site.yml calls it."""
    if subprocess.run(["which", "fping"], capture_output=True).returncode:
        pytest.skip("fping not installed")
    hosts = dict(list(expanded_lab["hosts"].items())[:3])
    for i, host in enumerate(hosts.values()):
        host["interfaces"]["compute"]["address"] = f"127.0.0.{21 + i}"
    path = tmp_path / "expanded.json"
    path.write_text(json.dumps({**expanded_lab, "hosts": hosts}))
    out = tmp_path / "out"

    first = acceptance(path, out)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "acceptance runs: no earlier report" in first.stderr
    report = json.loads((out / "acceptance.json").read_text())
    assert report["passed"] and len(report["inputs"]) == 64

    again = acceptance(path, out)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "acceptance skipped, nothing it depends on changed" in again.stdout
    assert FORCE_HINT in again.stdout  # the skip says how to measure anyway
    assert json.loads((out / "acceptance.json").read_text()) == report  # left as it was

    # An explicit run (the CLI's default, as the playbook run on its own) always measures:
    # a new report, though nothing changed and the last one passed.
    written = (out / "acceptance.json").stat().st_mtime_ns
    explicit = acceptance(path, out, when="")
    assert explicit.returncode == 0, explicit.stdout + explicit.stderr
    assert "skipped" not in explicit.stdout
    assert "PASSED" in explicit.stdout
    assert (out / "acceptance.json").stat().st_mtime_ns != written

    # A host whose network changed in this run: measured again (`false` answers no probe,
    # so this run fails, which proves it ran), and a failed report is never skipped.
    changed = acceptance(path, out, "--changed-hosts", "gpu01", prefix="false")
    assert changed.returncode == 1, changed.stdout + changed.stderr
    assert "acceptance runs: network setup changed on gpu01" in changed.stderr
    after_failure = acceptance(path, out, prefix="false")
    assert after_failure.returncode == 1, after_failure.stdout
    assert "acceptance runs: the last run failed" in after_failure.stderr
