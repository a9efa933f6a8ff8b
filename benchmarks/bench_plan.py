"""Plan pipeline figures: validate + lock + expand time by plan size, and the inventory
plugin against a static YAML inventory of the same hosts, measured in the same run."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plan_factory import synthetic_plan

from cluster_plan.api import load_expanded, lock_plan

ROOT = Path(__file__).resolve().parent.parent
SIZES = [int(s) for s in os.environ.get("BENCH_SIZES", "64,1024,4096,16384").split(",")]
INVENTORY_SIZES = [int(s) for s in os.environ.get("BENCH_INVENTORY_SIZES", "1024").split(",")]
REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))


def _best(fn: object, repeat: int = REPEAT) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return min(times)


def pipeline(workdir: Path) -> None:
    print(f"validate + lock + expand (best of {REPEAT})")
    print(f"{'nodes':>7} {'seconds':>8} {'us/node':>8} {'vs 64-node per-node':>20}")
    base = None
    for size in SIZES:
        plan = workdir / f"plan{size}.yml"
        plan.write_text(synthetic_plan(size))
        lock_plan(plan)  # the first lock is part of what a user does once

        def run(plan: Path = plan) -> None:
            lock_plan(plan, write=False)
            load_expanded(plan)

        seconds = _best(run)
        per_node = seconds / size * 1e6
        base = base or per_node
        print(f"{size:>7} {seconds:>8.3f} {per_node:>8.1f} {per_node / base:>19.2f}x")


def _static_inventory(expanded: dict, path: Path) -> None:
    cluster = {k: v for k, v in expanded.items() if k not in ("hosts", "groups")}
    doc = {
        "all": {
            "vars": {"cluster_plan": cluster},
            "hosts": {
                n: {"ansible_host": h["address"], "plan_host": h}
                for n, h in expanded["hosts"].items()
            },
            "children": {
                g: {"hosts": {m: None for m in members}}
                for g, members in expanded["groups"].items()
            },
        }
    }
    path.write_text(yaml.dump(doc, Dumper=yaml.CSafeDumper, sort_keys=False))


def _ansible_inventory(source: Path) -> float:
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"))
    exe = Path(sys.executable).parent / "ansible-inventory"
    times = []
    for _ in range(REPEAT):
        start = time.perf_counter()
        subprocess.run(
            [str(exe), "-i", str(source), "--list"],
            cwd=ROOT,
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def inventory(workdir: Path) -> None:
    print(
        f"\nansible-inventory --list: plugin vs static YAML of the same hosts (median of {REPEAT})"
    )
    for size in INVENTORY_SIZES:
        plan = workdir / f"inv{size}.yml"
        plan.write_text(synthetic_plan(size))
        lock_plan(plan)
        static = workdir / f"static{size}.yml"
        _static_inventory(load_expanded(plan), static)
        static_s = _ansible_inventory(static)
        plugin_s = _ansible_inventory(plan)
        print(
            f"{size:>7} hosts: static {static_s:.2f} s, plugin {plugin_s:.2f} s, "
            f"ratio {plugin_s / static_s:.2f}x (goal <= 1.1x)"
        )


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        pipeline(Path(tmp))
        inventory(Path(tmp))
    print(json.dumps({"sizes": SIZES}))


if __name__ == "__main__":
    main()
