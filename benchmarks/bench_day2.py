"""Day-2 figures on a converged lab: drift against `ansible-playbook site.yml --check` (same
run), backup and restore-drill time per node, and what a second, unchanged backup adds.

    CLUSTER_PLAN_LAB_ID=ID .venv/bin/python benchmarks/bench_day2.py [--plan PLAN]
        [--dedup-host gpu01] [--no-check-run]

Prints figures; asserts nothing about time. Needs root and a lab converged with site.yml
(backups included); says so and exits 0 without them, so `make bench` runs anywhere. The
dedup figure empties one node's repository first (borg delete, then init): run it on a lab,
never on a cluster whose backups you keep.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def run(*argv: str, timeout: float = 1800) -> tuple[float, subprocess.CompletedProcess[str]]:
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    started = time.monotonic()
    done = subprocess.run(
        list(argv),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return time.monotonic() - started, done


def on_node(plan: str, host: str, script: str) -> str:
    _, done = run(str(BIN / "cluster-plan"), "lab", "run", plan, host, "--", "sh", "-c", script)
    if done.returncode != 0:
        raise SystemExit(f"{host}: {script}: {done.stderr.strip()[-300:]}")
    return done.stdout


def converged(plan: str) -> bool:
    from cluster_plan.api import load_expanded

    _, status = run(str(BIN / "cluster-plan"), "lab", "status", plan)
    if status.returncode != 0:
        return False
    host = next(iter(load_expanded(plan)["hosts"]))
    _, probe = run(
        str(BIN / "cluster-plan"),
        "lab",
        "run",
        plan,
        host,
        "--",
        "test",
        "-x",
        "/usr/local/sbin/cluster-plan-backup",
    )
    return probe.returncode == 0


def drift_vs_check(plan: str, check_run: bool) -> None:
    times = []
    for _ in range(3):
        seconds, done = run(str(BIN / "cluster-plan"), "drift", plan, "--format", "json")
        findings = len(json.loads(done.stdout)["findings"]) if done.stdout else "?"
        times.append(seconds)
        print(f"cluster-plan drift                     {seconds:7.1f} s   findings={findings}")
    drift = statistics.median(times)
    if not check_run:
        return
    seconds, done = run(str(BIN / "ansible-playbook"), "-i", plan, "site.yml", "--check")
    print(f"ansible-playbook site.yml --check      {seconds:7.1f} s   rc={done.returncode}")
    print(f"drift / check: {drift / seconds:.3f}x   (goal: at most 0.2x)")


def backup_per_node(plan: str, hosts: list[str]) -> None:
    """One node at a time, so each figure is that node's alone: the unit's wall time (hooks,
    backup and drill), borg create + prune + compact, and the restore drill."""
    print(f"{'host':10} {'unit s':>7} {'backup s':>9} {'drill s':>8} {'size':>10} {'added':>10}")
    for host in hosts:
        seconds, done = run(
            str(BIN / "cluster-plan"),
            "lab",
            "run",
            plan,
            host,
            "--",
            "systemctl",
            "start",
            "cluster-plan-backup.service",
        )
        status = json.loads(on_node(plan, host, "cluster-plan-backup status"))
        entry = status["repositories"]["target"]
        drill = status.get("drills", {}).get("target", {})
        if done.returncode != 0:
            print(f"{host:10} FAILED: {entry.get('error') or drill.get('message')}")
            continue
        print(
            f"{host:10} {seconds:7.1f} {entry['seconds']:9.1f} {drill['seconds']:8.1f} "
            f"{entry['original_size'] / 1e6:8.1f}MB {entry['deduplicated_size'] / 1e3:8.1f}kB"
        )


def repository_bytes(plan: str, backup_host: str, repo: str) -> int:
    return int(on_node(plan, backup_host, f"du -sb {repo}").split()[0])


def dedup(plan: str, expanded: Any, host: str) -> None:
    target = expanded["backups"]["target"]
    repo = f"{target['path']}/{host}"
    on_node(
        plan, host, "BORG_DELETE_I_KNOW_WHAT_I_AM_DOING=YES cluster-plan-backup borg delete --force"
    )
    on_node(plan, host, "cluster-plan-backup init")
    sizes, added = [], []
    for _ in range(2):
        on_node(plan, host, "systemctl start cluster-plan-backup.service")
        sizes.append(repository_bytes(plan, target["host"], repo))
        added.append(
            json.loads(on_node(plan, host, "cluster-plan-backup status"))["repositories"]["target"][
                "deduplicated_size"
            ]
        )
    growth = (sizes[1] - sizes[0]) / sizes[0]
    print(
        f"{host}: repository {sizes[0] / 1e6:.2f} MB after the first backup, "
        f"{sizes[1] / 1e6:.2f} MB after a second with no change: +{growth:.2%} "
        f"(borg: the second added {added[1]} bytes, the first {added[0]}; goal: under 1 %)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", default="inventory/lab/cluster.yml")
    parser.add_argument("--dedup-host", default="gpu01")
    parser.add_argument("--no-check-run", action="store_true", help="skip site.yml --check")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_day2: skipped, the lab needs root")
        return 0
    if not converged(args.plan):
        print(
            f"bench_day2: skipped, no lab converged with site.yml under "
            f"CLUSTER_PLAN_LAB_ID={os.environ.get('CLUSTER_PLAN_LAB_ID', '(plan name)')}"
        )
        return 0
    from cluster_plan.api import load_expanded

    expanded = load_expanded(args.plan)
    load = os.getloadavg()[0]
    print(
        f"plan: {args.plan}   {len(expanded['hosts'])} hosts   load {load:.1f} "
        f"on {os.cpu_count()} CPUs"
    )
    drift_vs_check(args.plan, not args.no_check_run)
    backup_per_node(args.plan, list(expanded["hosts"]))
    dedup(args.plan, expanded, args.dedup_host)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
