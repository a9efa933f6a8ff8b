"""The cost curve as the cluster grows: `lab up`, a first `site.yml` converge, its idempotent
re-run with every stage in full (`-e site_converge_when=always`) and the re-run as a user runs
it (through the stage gate) for lab plans of 8, 16 and 32 nodes, printed as a table with time
per node.

    .venv/bin/python benchmarks/bench_growth.py [--sizes 8,16,32] [--playbook site.yml] [--no-full]

Each size is the lab plan (inventory/lab/cluster.yml) with its CPU group grown to make up the
node count, locked afresh in a temporary folder, brought up as its own lab (id "growth"),
converged twice and taken down, even on failure. Needs root (the lab); says so and exits 0
without it, so `make bench` runs anywhere. Prints figures and ratios against the smallest
size measured in the same run; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the test suite's playbook runner (tests/support)

from support.playbooks import changed_lines  # noqa: E402

BIN = Path(sys.executable).parent
LAB_ID = "growth"
FULL = ("-e", "site_converge_when=always")  # every stage, whatever the stage gate finds
RECAP = re.compile(r"^(\S+)\s+:\s+ok=\d+\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def grown_plan(nodes: int, folder: Path) -> Path:
    """The lab plan with its CPU group grown (over both racks) to `nodes` hosts in all."""
    plan: dict[str, Any] = yaml.safe_load((ROOT / "inventory/lab/cluster.yml").read_text())
    groups = plan["node_groups"]
    others = sum(g["count"] for name, g in groups.items() if name != "cpu")
    if nodes <= others:
        raise SystemExit(f"bench_growth: {nodes} nodes is not more than the {others} fixed ones")
    groups["cpu"] = {**groups["cpu"], "count": nodes - others, "racks": ["r1", "r2"]}
    path = folder / f"growth-{nodes}.yml"
    path.write_text(yaml.safe_dump(plan, sort_keys=False))
    cli("lock", str(path))
    return path


def cli(*argv: str, timeout: float = 1800) -> float:
    started = time.monotonic()
    subprocess.run(
        [str(BIN / "cluster-plan"), *argv],
        check=True,
        cwd=ROOT,
        timeout=timeout,
        stdout=subprocess.DEVNULL,
    )
    return time.monotonic() - started


def converge(plan: Path, playbooks: list[str], label: str, *extra: str) -> tuple[float, int, int]:
    """(seconds, return code, changed tasks) of one ansible-playbook run; a re-run that changed
    something names the tasks, so the figure can be read."""
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    started = time.monotonic()
    result = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", str(plan), *extra, *playbooks],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=5400,
    )
    seconds = time.monotonic() - started
    # each run's figure as it ends: a size that fails later still shows what it measured
    print(f"  {label}: {seconds:.1f} s, rc {result.returncode}", file=sys.stderr, flush=True)
    if result.returncode != 0:
        # every failure with its message (the tail alone may show only the last play's)
        for line in result.stdout.splitlines():
            if line.startswith(("fatal: ", "failed: ")):
                print(line[:2000], file=sys.stderr)
        print(result.stdout[-3000:], file=sys.stderr)
    changed = sum(int(row[1]) for row in RECAP.findall(result.stdout))
    if label != "first converge" and changed:
        for line in changed_lines(result.stdout):
            print(f"  {label} changed: {line}", file=sys.stderr)
    return seconds, result.returncode, changed


def measure(nodes: int, folder: Path, playbooks: list[str], full: bool) -> dict[str, float]:
    plan = grown_plan(nodes, folder)
    rerun, rc2, changed = float("nan"), 0, 0
    try:
        up = cli("lab", "up", str(plan))
        first, rc1, _ = converge(plan, playbooks, "first converge")
        if full:
            rerun, rc2, changed = converge(plan, playbooks, "re-run in full", *FULL)
        gated, rc3, gated_changed = converge(plan, playbooks, "gated re-run")
    finally:
        cli("lab", "down", str(plan))
    if rc1 or rc2 or rc3:
        raise SystemExit(f"bench_growth: site.yml failed on {nodes} nodes (rc {rc1}, {rc2}, {rc3})")
    return {
        "up": up,
        "first": first,
        "rerun": rerun,
        "changed": changed + gated_changed,
        "gated": gated,
    }


def stop(signum: int, _frame: object) -> None:
    raise SystemExit(f"bench_growth: stopped by signal {signum}; taking the lab down")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="8,16,32", help="node counts (default 8,16,32)")
    parser.add_argument("--playbook", action="append", dest="playbooks")
    parser.add_argument(
        "--no-full",
        dest="full",
        action="store_false",
        help="skip the re-run in full: the gated re-run follows the first converge (a large size "
        "in less time; its changed column is then the gated run's alone)",
    )
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_growth: skipped, the lab needs root")
        return 0
    os.environ["CLUSTER_PLAN_LAB_ID"] = LAB_ID
    # SIGTERM (and SIGINT, which a shell's background job ignores) end the sweep through
    # `finally`, so the lab of the size being measured is taken down.
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    playbooks = args.playbooks or ["site.yml"]
    print(f"playbooks: {' '.join(playbooks)}; {os.cpu_count()} CPUs; per node = seconds / nodes")
    print(
        f"{'nodes':>5} {'lab up s':>9} {'/node':>6} {'converge s':>11} {'/node':>6} "
        f"{'full re-run s':>13} {'/node':>6} {'gated s':>8} {'/node':>6} {'changed':>7} "
        f"{'x base':>7} {'load':>5}",
        flush=True,
    )
    base: dict[str, float] | None = None
    with tempfile.TemporaryDirectory(prefix="cluster-plan-growth-") as folder:
        # the sizes' backup passphrases go with their labs, never into the tester's home
        os.environ["CLUSTER_PLAN_SECRETS_DIR"] = str(Path(folder) / "secrets")
        for nodes in sizes:
            f = measure(nodes, Path(folder), playbooks, args.full)
            base = base or f
            # a row as soon as it is measured: a long sweep stopped later keeps what it had
            print(
                f"{nodes:5d} {f['up']:9.1f} {f['up'] / nodes:6.2f} {f['first']:11.1f} "
                f"{f['first'] / nodes:6.2f} {f['rerun']:13.1f} {f['rerun'] / nodes:6.2f} "
                f"{f['gated']:8.1f} {f['gated'] / nodes:6.2f} "
                f"{int(f['changed']):7d} {f['first'] / base['first']:7.2f} "
                f"{os.getloadavg()[0]:5.1f}",
                flush=True,
            )
    print(f"x base: first converge against the first size ({sizes[0]} nodes), this run")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
