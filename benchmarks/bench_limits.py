"""What the tests of absurd input once bounded by the clock, as figures: each against a
baseline measured in the same run (the lab plan validated; a bare Python start), so a loaded
machine moves both. The tests keep the behaviour (a finding, nothing enumerated, a bounded
memory peak); how long it takes is here (tests/unit/test_limits.py, test_load.py,
tests/plans/test_bad_plans.py, tests/lab/test_lab_units.py, tests/roles/test_slurmctld_handback.py).
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from cluster_plan.plan.load import load_plan_file, parse_plan_text
from cluster_plan.plan.validate import validate_text

ROOT = Path(__file__).resolve().parent.parent
LAB = ROOT / "inventory" / "lab" / "cluster.yml"
BAD = ROOT / "tests" / "plans" / "bad"
HANDBACK = ROOT / "roles" / "slurm" / "files" / "slurmctld-handback"
BIN = Path(sys.executable).parent
REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))


def _best(fn: Callable[[], object], repeat: int = REPEAT) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _row(name: str, seconds: float, baseline: float) -> None:
    print(f"{name:<58} {seconds:>8.3f} s {seconds / baseline:>8.1f}x")


def _groups(count: int, size: int) -> str:
    groups = "".join(
        f'  g{i}: {{count: {size}, hostname: "g{i}n{{n}}", hardware: cpu, racks: [r1, r2]}}\n'
        for i in range(count)
    )
    return (
        LAB.read_text()
        .replace("node_groups:\n", "node_groups:\n" + groups, 1)
        .replace("cidr: 10.40.0.0/24", "cidr: 10.0.0.0/10")
        .replace("cidr: 10.41.0.0/24", "cidr: 10.64.0.0/10")
        .replace("cidr: 10.42.0.0/24", "cidr: 10.128.0.0/10")
    )


def _reserved(reserved: str) -> None:
    from cluster_plan.plan.allocate import allocate_addresses
    from cluster_plan.plan.expand import expand

    text = LAB.read_text().replace(
        "    cidr: 10.41.0.0/24\n", f"    cidr: 11.0.0.0/8\n    reserved: {reserved}\n", 1
    )
    result = validate_text(text, "big.yml")
    lock, _ = allocate_addresses(result.plan, result.nodes)
    expand(result.plan, result.nodes, lock)


def _laughs() -> str:
    text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, 10):
        text += f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n"
    return text


def plans() -> None:
    lab_text = LAB.read_text()
    baseline = _best(lambda: validate_text(lab_text, "lab.yml"))
    print(f"\nplan limits (best of {REPEAT}; baseline: the lab plan validated)")
    _row("baseline: validate the lab plan (9 nodes)", baseline, baseline)
    absurd = lab_text.replace("    count: 2\n", "    count: 10000000\n", 1)
    _row("count: 10000000 refused", _best(lambda: validate_text(absurd, "b.yml")), baseline)
    _row(
        "40 groups of 100,000 refused",
        _best(lambda: validate_text(_groups(40, 100_000), "b.yml")),
        baseline,
    )
    for reserved in ("[11.0.0.0/9, 11.128.0.0-11.255.255.0]", "16000000"):
        _row(
            f"a /8, reserved {reserved[:16]}: validate, lock, expand",
            _best(lambda r=reserved: _reserved(r)),
            baseline,
        )
    small = _best(lambda: validate_text(_groups(500, 40), "g.yml"), 1)
    large = _best(lambda: validate_text(_groups(2000, 40), "g.yml"), 1)
    _row("500 groups of 40 (20,009 nodes) validated", small, baseline)
    _row("2,000 groups of 40 (80,009 nodes) validated", large, baseline)
    print(f"{'  4x the nodes: time ratio (linear ~4, quadratic ~16)':<58} {large / small:>8.2f}")
    laughs = _laughs()
    _row("billion laughs refused", _best(lambda: parse_plan_text(laughs, "p.yml")), baseline)
    _row("/dev/zero refused", _best(lambda: load_plan_file("/dev/zero")), baseline)


def bad_plans() -> None:
    """Each plan of the bad corpus through the CLI, as tests/plans/test_bad_plans.py runs it."""
    from cluster_plan import cli

    def validate(path: Path) -> None:
        with open(os.devnull, "w") as sink:
            saved = sys.stdout
            sys.stdout = sink
            try:
                cli.main(["validate", "--no-lock", "--format", "json", str(path)])
            finally:
                sys.stdout = saved

    base = _best(lambda: validate(ROOT / "tests" / "plans" / "base.yml"))
    times = sorted((_best(lambda p=p: validate(p), 1), p.name) for p in BAD.glob("*.yml"))
    print(f"\nbad plan corpus through `validate` ({len(times)} plans; baseline: base.yml)")
    _row("baseline: base.yml", base, base)
    for seconds, name in times[-3:]:
        _row(f"slowest: {name}", seconds, base)


def _run(argv: list[str], env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(argv, capture_output=True, check=False, timeout=300, env=env, cwd=ROOT)
    return time.perf_counter() - start


def fail_fast() -> None:
    """A command aimed at a lab that is not up refuses at once, without trying to connect."""
    python = _best(lambda: _run([sys.executable, "-c", "import cluster_plan"]))
    print("\na lab that is not up (best of 3; baseline: a Python start importing cluster_plan)")
    _row("baseline: python -c 'import cluster_plan'", python, python)
    proxy = [sys.executable, "-m", "cluster_plan.lab.proxycommand", "cpl-no-lab-admin"]
    _row("proxycommand refuses", _best(lambda: _run([*proxy, "10.40.0.10", "22"])), python)
    env = {**os.environ, "CLUSTER_PLAN_LAB_ID": "never-up", "ANSIBLE_FORCE_COLOR": "0"}
    version = _best(lambda: _run([str(BIN / "ansible"), "--version"], env))
    ping = [str(BIN / "ansible"), "-i", str(LAB), "head01", "-m", "ping"]
    _row("ansible --version (Ansible's own start)", version, python)
    _row("ansible ping refuses", _best(lambda: _run(ping, env)), python)


def handback() -> None:
    """slurmctld-handback waits for the backup's stopped note: how long past the backup's
    stop it starts (its poll), with a stand-in scontrol as the test has."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        state = work / "state"
        state.mkdir()
        (state / "heartbeat").write_bytes(struct.pack(">QQ", int(time.time()) - 3, 1))
        (work / "bin").mkdir()
        scontrol = work / "bin" / "scontrol"
        stop = f"{sys.executable} {HANDBACK} --stopped {state} osd01"
        scontrol.write_text(f"#!/bin/sh\n(sleep 2; {stop}) >/dev/null 2>&1 &\nexit 1\n")
        scontrol.chmod(0o755)
        env = {**os.environ, "PATH": f"{work / 'bin'}:{os.environ['PATH']}"}
        python = _run([sys.executable, "-c", "pass"])
        seconds = _run([sys.executable, str(HANDBACK), str(state), "20"], env)
    print("\nslurmctld-handback (the backup stops 2 s after it is told)")
    _row("baseline: python -c pass", python, python)
    _row("waited, of which 2 s for the backup", seconds, python)


def main() -> None:
    plans()
    bad_plans()
    fail_fast()
    handback()


if __name__ == "__main__":
    main()
