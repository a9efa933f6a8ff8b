"""The end of `make test`: merge the runs' evidence under reports/ and print it.

    python tests/support/phase_report.py --started EPOCH --tests-started EPOCH RUN:EXIT ...

Each RUN is a pytest run made with `--phases=RUN --junitxml=reports/RUN.xml`, EXIT its exit
status. Writes reports/phases.json (every phase, the installs and the whole run) and
reports/durations.txt (every test of every run, slowest first), prints the phase totals, a
WARNING line for each phase over tests/budget.json (never a failure), and last a plain
`N passed, N failed` line, which CI reads. Exits 0 when every run passed (pytest's 5, no
test collected, is not a failure), else 1.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# CLUSTER_PLAN_REPORTS moves them (the tests of this code write elsewhere)
REPORTS = Path(
    os.environ.get("CLUSTER_PLAN_REPORTS", Path(__file__).resolve().parents[2] / "reports")
)
BUDGET = ROOT / "tests" / "budget.json"
NO_TESTS = 5  # pytest: no test collected
ORDER = (
    "installs",
    "non-lab tests",
    "session lab bring-up",
    "converge",
    "session lab tests",
    "lab changes",
    "Kubernetes lab",
    "lifecycle labs",
    "whole run",
)


def junit_counts(path: Path) -> dict[str, int]:
    """passed, failed (failures and errors) and skipped of one JUnit file; zeros if absent."""
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    if not path.is_file():
        return counts
    root = ET.parse(path).getroot()
    for suite in root.iter("testsuite"):
        tests, skipped = int(suite.get("tests", 0)), int(suite.get("skipped", 0))
        failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        counts["failed"] += failed
        counts["skipped"] += skipped
        counts["passed"] += tests - failed - skipped
    return counts


Merged = tuple[dict[str, float], dict[str, float], int]  # phases, busy CPU-s, cores


def merge(runs: list[str], installs_s: float, whole_s: float) -> Merged:
    phases: dict[str, float] = {"installs": installs_s}
    busy: dict[str, float] = {}
    cores = os.cpu_count() or 1
    durations: list[str] = []
    for run in runs:
        data = REPORTS / f"{run}.phases.json"
        if data.is_file():
            summary = json.loads(data.read_text())
            for phase, seconds in summary["phases"].items():
                phases[phase] = phases.get(phase, 0.0) + seconds
            for phase, seconds in (summary.get("busy_cpu_s") or {}).items():
                busy[phase] = busy.get(phase, 0.0) + seconds
            cores = summary.get("cores") or cores
        listed = REPORTS / f"{run}.durations.txt"
        if listed.is_file():
            durations += listed.read_text().splitlines()[1:]
    phases["whole run"] = whole_s
    durations.sort(key=lambda line: -float(line.split()[0]))
    header = f"{'total':>9} {'setup':>9} {'call':>9} {'teardown':>9}  phase / test"
    (REPORTS / "durations.txt").write_text("\n".join([header, *durations]) + "\n")
    (REPORTS / "phases.json").write_text(json.dumps(phases, indent=2) + "\n")
    (REPORTS / "busy.json").write_text(json.dumps({"cores": cores, "busy_cpu_s": busy}) + "\n")
    return phases, busy, cores


def busy_cores(cpu_s: float | None, seconds: float, cores: int) -> str:
    """How many of the machine's cores were busy on average in a phase, as `1.7 of 2`."""
    if cpu_s is None or seconds <= 0:
        return ""
    return f"{cpu_s / seconds:4.1f} of {cores}"


def print_phases(merged: Merged, budget: dict[str, float]) -> None:
    phases, busy_cpu_s, cores = merged
    print("\nphases of this `make test` (reports/phases.json; every test: reports/durations.txt)")
    print(f"{'phase':<22} {'seconds':>9} {'budget':>9}  cores busy")
    for phase in sorted(phases, key=lambda p: ORDER.index(p) if p in ORDER else len(ORDER)):
        limit = budget.get(phase)
        shown = f"{limit:9.0f}" if limit is not None else f"{'-':>9}"
        used = busy_cores(busy_cpu_s.get(phase), phases[phase], cores)
        print(f"{phase:<22} {phases[phase]:9.1f} {shown}  {used}".rstrip())
    for phase, seconds in phases.items():
        limit = budget.get(phase)
        if limit is not None and seconds > limit:
            print(
                f"WARNING: phase '{phase}' took {seconds:.0f} s, over its budget of {limit:.0f} s "
                f"(tests/budget.json): what was added costs this much; trim or raise the budget"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--started", type=float, help="`make test`'s start (epoch seconds)")
    parser.add_argument("--tests-started", type=float, help="when `make deps` had finished")
    parser.add_argument("runs", nargs="+", metavar="RUN:EXIT")
    args = parser.parse_args(argv)
    runs = [(name, int(code)) for name, code in (r.rsplit(":", 1) for r in args.runs)]
    REPORTS.mkdir(exist_ok=True)
    started = args.started or time.time()
    installs = (args.tests_started or started) - started
    merged = merge([name for name, _ in runs], installs, time.time() - started)
    budget = {k: float(v) for k, v in json.loads(BUDGET.read_text())["seconds"].items()}
    print_phases(merged, budget)
    total = {"passed": 0, "failed": 0, "skipped": 0}
    bad = False
    for name, code in runs:
        counts = junit_counts(REPORTS / f"{name}.xml")
        stopped = code not in (0, NO_TESTS) and counts["failed"] == 0
        if stopped:  # stopped before any test failed (a missing lab prerequisite, say)
            print(f"the {name} run stopped with exit status {code}: counted as one failure")
            counts["failed"] = 1
        bad = bad or code not in (0, NO_TESTS)
        for key in total:
            total[key] += counts[key]
    print(f"{total['passed']} passed, {total['failed']} failed, {total['skipped']} skipped")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
