"""The inventory as the cluster grows: figures and ratios, printed, never asserted.

For each size (BENCH_SIZES, default 512,2048,20000 hosts) in the same run:
- a playbook's inventory load (`ansible-playbook --list-hosts`) through the plugin, against a
  minimal static inventory of the same host names with only ansible_host set (the baseline);
- `ansible-inventory --list --export` (what AWX inventory syncs run), `--graph`, plain `--list`;
- `cluster-plan expand` (JSON and YAML) and a first `cluster-plan lock`.
Each with wall seconds and peak memory (maxrss of the child), best of BENCH_REPEAT runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plan_factory import synthetic_plan

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SIZES = [int(s) for s in os.environ.get("BENCH_SIZES", "512,2048,20000").split(",")]
REPEAT = int(os.environ.get("BENCH_REPEAT", "2"))
PLAY = "- hosts: all\n  gather_facts: false\n  tasks: []\n"


def measure(argv: list[str], cwd: Path) -> tuple[float, float]:
    """(best wall seconds, peak MiB of the child) over REPEAT runs."""
    best, peak = float("inf"), 0.0
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")}
    for _ in range(REPEAT):
        started = time.perf_counter()
        child = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)  # this child's own peak, not the largest yet
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode:
            raise subprocess.CalledProcessError(child.returncode, argv)
        best = min(best, time.perf_counter() - started)
        peak = max(peak, usage.ru_maxrss / 1024)
    return best, peak


def static_inventory(plan: Path, path: Path) -> None:
    """The baseline: the same host names, only ansible_host, no groups, one INI line each."""
    expanded = json.loads(
        subprocess.run([str(BIN / "cluster-plan"), "expand", "--format", "json", str(plan)],
                       capture_output=True, text=True, check=True).stdout
    )["result"]  # fmt: skip
    path.write_text(
        "".join(f"{name} ansible_host={h['address']}\n" for name, h in expanded["hosts"].items())
    )


def row(label: str, seconds: float, mib: float, baseline: float | None = None) -> str:
    ratio = f"  {seconds / baseline:5.2f}x the static inventory" if baseline else ""
    return f"  {label:<40} {seconds:8.2f} s {mib:8.0f} MiB{ratio}"


def size_run(size: int, work: Path) -> None:
    plan = work / f"plan{size}" / "cluster.yml"
    plan.parent.mkdir()
    plan.write_text(synthetic_plan(size))
    cli = [str(BIN / "cluster-plan")]
    print(f"{size} GPU hosts (+4 others):")
    print(row("cluster-plan lock (first)", *measure([*cli, "lock", str(plan)], work)))
    print(row("cluster-plan expand --format json", *measure(
        [*cli, "expand", "--format", "json", str(plan)], work)))  # fmt: skip
    print(row("cluster-plan expand (YAML)", *measure([*cli, "expand", str(plan)], work)))
    static = work / f"static{size}.ini"
    # Written by a child: Linux carries a process's peak RSS across fork and exec into its
    # children's maxrss, so this process must never hold a large expansion itself.
    subprocess.run([sys.executable, __file__, "--static", str(plan), str(static)], check=True)
    (work / "play.yml").write_text(PLAY)
    playbook = [str(BIN / "ansible-playbook"), "--list-hosts", str(work / "play.yml")]
    base, base_mib = measure([*playbook, "-i", str(static)], work)
    print(row("playbook load, static (baseline)", base, base_mib))
    print(row("playbook load, plan plugin", *measure([*playbook, "-i", str(plan)], work), base))
    inventory = [str(BIN / "ansible-inventory"), "-i", str(plan)]
    for label, extra in (("ansible-inventory --list --export", ["--list", "--export"]),
                         ("ansible-inventory --graph", ["--graph"]),
                         ("ansible-inventory --list", ["--list"])):  # fmt: skip
        print(row(label, *measure([*inventory, *extra], work)))


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-inventory-") as tmp:
        for size in SIZES:
            size_run(size, Path(tmp))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--static"]:
        static_inventory(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        main()
