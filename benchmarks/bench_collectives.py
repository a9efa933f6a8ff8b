"""The payload on a converged lab, measured: the all-reduce's bus bandwidth against the iperf3
bandwidth of the same pair of nodes (the baseline, measured in the same run), what the
collectives and training phases add to acceptance, what the software stage costs in a converge
(a steady-state re-run, the stage gate's skip, and a reinstall of one node's stack from the
lab's package cache), and the disk the stack takes on a node.

    CLUSTER_PLAN_LAB_ID=<lab> .venv/bin/python benchmarks/bench_collectives.py [--plan PLAN]

Needs a lab converged with site.yml under $CLUSTER_PLAN_LAB_ID (e.g. `make lab`); says so and
exits 0 without one, so `make bench` runs anywhere. The reinstall purges the stack on the
second training node and converges it back (the node ends as it was). Prints figures; asserts
nothing about time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the test suite's playbook runner (tests/support)

from support.playbooks import playbook, recap  # noqa: E402

BIN = Path(sys.executable).parent


def cli(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "cluster-plan"), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, check=False)  # fmt: skip


def on_node(plan: str, host: str, script: str, timeout: float = 900) -> str:
    result = cli("lab", "run", plan, host, "--", "sh", "-c", script, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"{host}: {script}\n{result.stdout}\n{result.stderr}")
    return result.stdout


def acceptance(plan: str, nodes: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as out:
        proc = cli("acceptance", plan, "--transport", "lab", "--no-history", "--phases",
                   "bandwidth,collectives,training", "--nodes", ",".join(nodes),
                   "--output-dir", out)  # fmt: skip
        if proc.returncode not in (0, 1):
            raise RuntimeError(proc.stdout + proc.stderr)
        report: dict[str, Any] = json.loads((Path(out) / "acceptance.json").read_text())
        return report


def timed_stage(plan: str, *extra: str) -> float:
    """Seconds of the software stage; it must end without a failure."""
    run = playbook(Path(plan), ["playbooks/software.yml"], *extra)
    failed = {h: r for h, r in recap(run.output).items() if r["failed"] or r["unreachable"]}
    if run.result.returncode != 0 or failed:
        raise RuntimeError(f"software stage failed: {failed}\n{run.output[-2000:]}")
    return run.seconds


def stack_bytes(plan: str, host: str, packages: str) -> int:
    """Installed-Size (KiB) of every package on `host` that a node without the stack lacks."""
    sizes = on_node(plan, host, "dpkg-query -W -f='${Package} ${Installed-Size}\\n'")
    mine = dict(line.split() for line in sizes.splitlines() if len(line.split()) == 2)
    base = set(packages.split())
    return sum(int(kib) * 1024 for name, kib in mine.items() if name not in base and kib.isdigit())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", default=str(ROOT / "inventory" / "lab" / "cluster.yml"))
    args = parser.parse_args()
    if (
        os.geteuid() != 0
        or not os.environ.get("CLUSTER_PLAN_LAB_ID")
        or not shutil.which("nsenter")
    ):
        print(
            "bench_collectives: needs root and a converged lab under $CLUSTER_PLAN_LAB_ID; skipped"
        )
        return 0
    status = cli("lab", "status", args.plan, "--format", "json")
    if status.returncode != 0:
        print(f"bench_collectives: the lab is not up ({status.stdout.strip()[:200]}); skipped")
        return 0
    from cluster_plan.api import load_expanded

    expanded = load_expanded(args.plan)
    hosts = expanded["hosts"]
    pool = sorted(
        h for h, v in hosts.items() if any("python3-torch" in b["packages"]
                                           for b in v["software"].values())
    )  # fmt: skip
    bare = next(h for h, v in expanded["hosts"].items()
                if not v["software"] and "slurm_compute" in v["roles"])  # fmt: skip

    report = acceptance(args.plan, pool)
    (section,) = report["collectives"]["pools"]
    (job,) = report["collectives"]["training"]
    pair = report["bandwidth"][0]
    iperf_GBps = pair["gbps"] / 8
    timing = report["timing"]
    print(f"nodes: {', '.join(pool)} (plan links {section['link_gbps']:g} Gb/s, lab x "
          f"{report['criteria']['rate_scale']:g})")  # fmt: skip
    print(
        f"iperf3 pair (baseline):     {pair['gbps']:.3f} Gb/s = {iperf_GBps:.4f} GB/s (plan units)"
    )
    for row in section["sizes"]:
        print(f"  all-reduce {row['bytes']:>9} B: busbw {row['busbw_GBps']:.4f} GB/s, "
              f"{row['time_us']:.0f} us")  # fmt: skip
    print(f"all-reduce busbw / iperf3:  {section['busbw_GBps'] / iperf_GBps:.3f} "
          f"(largest message; floor {section['floor_GBps']:g} GB/s = "
          f"{section['floor_GBps'] / iperf_GBps:.3f} of iperf3)")  # fmt: skip
    print(f"training: {job['steps']} steps, loss {job['first_loss']} -> {job['last_loss']}, "
          f"identical weights {job['identical_weights']}")  # fmt: skip
    jobs_s = float(timing.get("collectives_s", 0))
    print(f"acceptance: bandwidth phase {float(timing.get('total_s', 0)) - jobs_s:.1f} s, "
          f"collectives + training {jobs_s:.1f} s")  # fmt: skip

    gated = timed_stage(args.plan)
    steady = timed_stage(args.plan, "-e", "site_converge_when=always")
    print(f"software stage: gate holds {gated:.1f} s; full steady-state run {steady:.1f} s "
          f"({steady / gated:.2f}x)")  # fmt: skip

    victim = pool[-1]
    base = on_node(args.plan, bare, "dpkg-query -W -f='${Package}\\n'")
    stack = stack_bytes(args.plan, victim, base)
    print(f"disk: the stack adds {stack / 2**20:.0f} MiB of installed packages on {victim} "
          f"(beyond {bare}'s)")  # fmt: skip
    on_node(args.plan, victim, "DEBIAN_FRONTEND=noninteractive apt-get purge -y -q python3-torch "
            "python3-mpi4py openmpi-bin libopenmpi-dev lmod >/dev/null && "
            "apt-get autoremove --purge -y -q >/dev/null")  # fmt: skip
    reinstall = timed_stage(args.plan, "-e", "site_converge_when=always", "--limit", victim)
    print(f"software stage: reinstall of {victim}'s stack from the lab's package cache "
          f"{reinstall:.1f} s ({reinstall / steady:.2f}x the steady-state run)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
