"""Lab figures, printed (no assertions): `lab up` from a cold and a warm image cache, and
the memory of an idle node.

    sudo .venv/bin/python benchmarks/bench_lab.py [--skip-cold] [--plan PLAN]

Goals from issue 3: warm up under 60 s, cold up under 5 min, an idle node under 60 MiB.
Runs its own lab (id "bench") and takes it down at the end, even on failure. The cold run
builds the base image into a temporary cache, so the machine's cache is left as it was.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAB_ID = "bench"


def lab(command: str, plan: str, env: dict[str, str]) -> float:
    # the figures are the base image's and the boot's: the node images (docs/lab.md, Node
    # images) take minutes to build cold and would swamp them
    image = ["--image", "bare"] if command == "up" else []
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "cluster_plan.cli", "lab", command, plan, *image],
        check=True,
        env=env,
        cwd=REPO,
        timeout=900,
        stdout=subprocess.DEVNULL,
    )
    return time.monotonic() - started


def idle_memory(plan: str, settle_s: float) -> None:
    os.environ["CLUSTER_PLAN_LAB_ID"] = LAB_ID
    from cluster_plan.api import load_expanded
    from cluster_plan.lab import node
    from cluster_plan.lab.names import for_plan

    expanded = load_expanded(plan)
    time.sleep(settle_s)  # let boot-time work finish before calling the node idle
    names = for_plan(expanded)
    print(f"idle node memory after {settle_s:.0f}s (goal < 60 MiB each):")
    print(f"  {'node':<10} {'PSS MiB':>8} {'RSS MiB':>8} {'cgroup MiB':>11} {'procs':>6}")
    totals = []
    for host in expanded["hosts"]:
        mem = node.memory_mib(names, host)
        totals.append(mem["pss_mib"])
        print(
            f"  {host:<10} {mem['pss_mib']:8.1f} {mem['rss_mib']:8.1f} "
            f"{mem['cgroup_mib']:11.1f} {mem['processes']:6.0f}"
        )
    print(f"  mean PSS {sum(totals) / len(totals):.1f} MiB, all nodes {sum(totals):.0f} MiB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", default=str(REPO / "inventory" / "lab" / "cluster.yml"))
    parser.add_argument("--skip-cold", action="store_true", help="skip the cold-cache run")
    parser.add_argument(
        "--settle", type=float, default=20.0, help="idle seconds before measuring memory"
    )
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_lab: skipped, the lab needs root")
        return 0
    env = {**os.environ, "CLUSTER_PLAN_LAB_ID": LAB_ID}
    lab("down", args.plan, env)
    try:
        if not args.skip_cold:
            cold_cache = tempfile.mkdtemp(prefix="cluster-plan-bench-cache-")
            try:
                cold = lab("up", args.plan, {**env, "CLUSTER_PLAN_LAB_CACHE": cold_cache})
                print(f"lab up, cold cache (debootstrap + boot): {cold:6.1f} s  (goal < 300 s)")
                lab("down", args.plan, env)
            finally:
                shutil.rmtree(cold_cache, ignore_errors=True)
        lab("up", args.plan, env)  # makes sure the machine's cache is warm
        lab("down", args.plan, env)
        warm = lab("up", args.plan, env)
        print(f"lab up, warm cache:                      {warm:6.1f} s  (goal < 60 s)")
        noop = lab("up", args.plan, env)
        print(f"lab up on a running lab (no-op):         {noop:6.1f} s")
        idle_memory(args.plan, args.settle)
    finally:
        down = lab("down", args.plan, env)
        print(f"lab down:                                {down:6.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
