"""Network acceptance figures (printed, never asserted).

1. Bandwidth phase in the lab: wall time of the scheduled rounds for the lab's N nodes,
   against the goal 1.3 x (N-1) x per-test time and against a sequential pair-by-pair run of
   the same tests in the same run (needs root and the lab; skipped with the reason otherwise).
2. Schedule size for large synthetic fabrics: rounds against N-1 and against the lower bound
   the uplinks allow (pure computation, runs anywhere).

Environment: BENCH_ACCEPTANCE_DURATION (seconds per iperf3 test, default 2),
BENCH_ACCEPTANCE_SIZES (default 64,256,1024), CLUSTER_PLAN_LAB_ID (default bench).
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import time
from pathlib import Path

from cluster_plan.acceptance.runner import AcceptanceRunner, RunOptions
from cluster_plan.acceptance.schedule import schedule_rounds
from cluster_plan.acceptance.spec import AcceptanceSpec, Fabric, Node, spec_from_expanded
from cluster_plan.transport.execution import PrefixExecutor

ROOT = Path(__file__).resolve().parent.parent
PLAN = ROOT / "inventory" / "lab" / "cluster.yml"
DURATION = float(os.environ.get("BENCH_ACCEPTANCE_DURATION", "2"))
SIZES = [int(s) for s in os.environ.get("BENCH_ACCEPTANCE_SIZES", "64,256,1024").split(",")]


def bandwidth_phase(spec: AcceptanceSpec, executor: PrefixExecutor, sequential: bool) -> dict:
    options = RunOptions(phases=("bandwidth",), retest=False, sequential=sequential)
    runner = AcceptanceRunner(spec, executor, options, progress=lambda _m: None)
    report = runner.run()
    net = spec.networks[0].name
    gbps = [row["gbps"] for row in report["bandwidth"] if row["gbps"] is not None]
    return {
        "seconds": float(report["timing"][f"{net}.bandwidth_s"]),
        "rounds": int(report["timing"][f"{net}.bandwidth_rounds"]),
        "tests": len(report["bandwidth"]),
        "errors": sum(row["status"] == "error" for row in report["bandwidth"]),
        "median_gbps": statistics.median(gbps) if gbps else float("nan"),
        "min_gbps": min(gbps) if gbps else float("nan"),
        "first_error": next((row["error"] for row in report["bandwidth"] if row["error"]), None),
    }


def lab_bench() -> None:
    print("== bandwidth phase in the lab")
    if os.geteuid() != 0:
        print("skipped: the lab needs root")
        return
    missing = [t for t in ("iperf3", "fping", "debootstrap", "nsenter") if not shutil.which(t)]
    if missing:
        print(f"skipped: missing host tools {', '.join(missing)}")
        return
    os.environ.setdefault("CLUSTER_PLAN_LAB_ID", "bench")
    from cluster_plan.api import load_expanded
    from cluster_plan.lab import lifecycle
    from cluster_plan.transport.lab import lab_prefixes

    expanded = load_expanded(str(PLAN))
    try:
        lifecycle.up(expanded, str(PLAN))
        spec = spec_from_expanded(expanded, duration_s=DURATION)
        executor = PrefixExecutor(per_node=lab_prefixes(expanded, "lab-netns"))
        n = len(spec.networks[0].nodes)
        test_s = DURATION + RunOptions().omit_s
        goal = 1.3 * (n - 1) * test_s
        scheduled = bandwidth_phase(spec, executor, sequential=False)
        sequential = bandwidth_phase(spec, executor, sequential=True)
    finally:
        lifecycle.down(expanded)
    print(f"nodes N={n}, per-test time {test_s:g} s (iperf3 --omit 1 + {DURATION:g} s measured)")
    for name, fig in (("scheduled", scheduled), ("sequential", sequential)):
        print(
            f"{name:>10}: {fig['rounds']:3d} rounds, {fig['tests']} tests, {fig['errors']} "
            f"errors, {fig['seconds']:6.2f} s, median {fig['median_gbps']:.2f} Gb/s "
            f"(plan units), min {fig['min_gbps']:.2f}"
        )
        if fig["first_error"]:
            print(f"{'':>10}  first error: {fig['first_error']}")
    print(
        f"goal 1.3 x (N-1) x test = {goal:.2f} s; scheduled / goal = "
        f"{scheduled['seconds'] / goal:.2f}; ideal (N-1) x test = {(n - 1) * test_s:.1f} s, "
        f"scheduled / ideal = {scheduled['seconds'] / ((n - 1) * test_s):.2f}"
    )
    strict = 1.3 * (n - 1) * DURATION
    print(
        f"(counting only the measured {DURATION:g} s per test, the goal is {strict:.2f} s: "
        f"scheduled / goal = {scheduled['seconds'] / strict:.2f}; the 1 s warm-up is the gap)"
    )
    print(f"sequential / scheduled = {sequential['seconds'] / scheduled['seconds']:.2f}x")


def synthetic_fabric(n: int, per_rack: int = 32) -> tuple[list[Node], Fabric]:
    """Racks of 32 nodes with 200G links under 3200G leaf uplinks (2:1), as plan_factory."""
    racks = -(-n // per_rack)
    nodes = [Node(f"gpu{i:05d}", f"10.1.{i // 250}.{i % 250}", f"leaf{i // per_rack:04d}",
                  f"spine{i // per_rack // 16}", 200.0) for i in range(n)]  # fmt: skip
    capacity = {f"leaf{r:04d}": 3200.0 for r in range(racks)}
    capacity |= {f"spine{s}": 12800.0 for s in range(-(-racks // 16))}
    return nodes, Fabric(capacity)


def schedule_bench() -> None:
    print(
        "== schedule size for synthetic fabrics (32 x 200G per rack, 3200G leaf uplinks, "
        "16 racks per spine, 2 x 6400G spine uplinks)"
    )
    print(f"{'nodes':>6} {'rounds':>7} {'N-1':>6} {'uplink bound':>13} {'rounds/bound':>13} "
          f"{'seconds':>8}")  # fmt: skip
    for n in SIZES:
        nodes, fabric = synthetic_fabric(n)
        start = time.perf_counter()
        rounds = schedule_rounds(nodes, fabric)
        seconds = time.perf_counter() - start
        # every pair leaving a rack (a spine) crosses its leaf (spine) uplinks; a round
        # carries at most capacity / link of them
        per_rack, per_spine = min(n, 32), min(n, 32 * 16)
        bound = max(
            n - 1,
            -(-per_rack * (n - per_rack) // int(3200 / 200)),
            -(-per_spine * (n - per_spine) // int(12800 / 200)),
        )
        print(f"{n:6d} {len(rounds):7d} {n - 1:6d} {bound:13d} {len(rounds) / bound:13.2f} "
              f"{seconds:8.2f}")  # fmt: skip


def main() -> int:
    schedule_bench()
    lab_bench()
    return 0


if __name__ == "__main__":
    sys.exit(main())
