"""Converge time of the playbooks on the lab: first run; a re-run where nothing changed, as a
user runs it (through the stage gate, which skips each stage whose last converge still holds);
the same re-run with every stage in full (`-e site_converge_when=always`), under ansible.cfg's
mitogen_linear, under Ansible's own linear strategy, and with Ansible's defaults (linear, no
pipelining, no SSH ControlPersist, no fact cache, 5 forks).

    .venv/bin/python benchmarks/bench_converge.py [--plan PLAN] [--playbook site.yml ...]
        [--bare-both] [--no-defaults]

`--bare-both` makes the lab afresh before a first converge under Ansible's linear strategy,
and again before the first converge under mitogen_linear, so both first converges are
measured in the same run.

Prints figures, the linear/Mitogen and defaults/tuned ratios (`--no-defaults` skips that slow
run), the re-run's slowest tasks, and a baseline from the same run: 20 tasks that do nothing
(`command: true`) on every host, under each strategy, so the re-run can be read as "N tasks x
what one task costs here"; asserts
nothing about time. Needs root and the lab (`cluster-plan lab up PLAN`); says so and exits 0 without
them, so `make bench` runs anywhere. "First" is only a first converge on a freshly made lab:
on a converged lab it is one more re-run, and the output says which it was.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TOP = 20
EMPTY_TASKS = 20
EMPTY_PLAY = """- name: Empty tasks, the per-task baseline
  hosts: all
  gather_facts: false
  tasks:
{tasks}"""
EMPTY_TASK = """    - name: Nothing
      ansible.builtin.command: "true"
      changed_when: false
"""
RECAP = re.compile(
    r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M
)
# What Ansible does when ansible.cfg says nothing: its own ssh_args are
# "-C -o ControlMaster=auto -o ControlPersist=60s"; ControlPersist is switched off here.
LINEAR = {"ANSIBLE_STRATEGY": "linear"}
ANSIBLE_DEFAULTS = {
    **LINEAR,
    "ANSIBLE_PIPELINING": "False",
    "ANSIBLE_SSH_ARGS": "-C -o ControlMaster=no",
    "ANSIBLE_CACHE_PLUGIN": "memory",
    "ANSIBLE_GATHERING": "implicit",
    "ANSIBLE_FORKS": "5",
}


FULL = ["-e", "site_converge_when=always"]  # every stage, whatever the stage gate finds


def run(
    plan: str,
    playbooks: list[str],
    extra_env: dict[str, str] | None = None,
    extra_args: list[str] | None = None,
) -> tuple[float, int, int, int]:
    """(seconds, return code, changed tasks, hosts) of one ansible-playbook run."""
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}", **(extra_env or {})}
    started = time.monotonic()
    result = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", plan, *(extra_args or []), *playbooks],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.monotonic() - started
    rows = RECAP.findall(result.stdout)
    changed = sum(int(r[2]) for r in rows)
    if result.returncode != 0:
        print(result.stdout[-3000:], file=sys.stderr)
    return seconds, result.returncode, changed, len({r[0] for r in rows})


def lab_state(plan: str) -> tuple[bool, bool]:
    """(lab is up, slurm already converged on it)."""
    status = subprocess.run(
        [str(BIN / "cluster-plan"), "lab", "status", plan],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if status.returncode != 0:
        return False, False
    from cluster_plan.api import load_expanded

    controller = (load_expanded(plan)["groups"].get("slurm_controller") or [None])[0]
    if controller is None:
        return True, False
    probe = subprocess.run(
        [
            str(BIN / "cluster-plan"),
            "lab",
            "run",
            plan,
            controller,
            "--",
            "test",
            "-f",
            "/etc/slurm/slurm.conf",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return True, probe.returncode == 0


def remake(plan: str) -> bool:
    """Take the lab down and make it again: bare nodes from the lab's images."""
    for verb in ("down", "up"):
        made = subprocess.run(
            [str(BIN / "cluster-plan"), "lab", verb, plan],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        if made.returncode != 0:
            print(f"lab {verb} failed:\n{made.stdout}{made.stderr}", file=sys.stderr)
            return False
    return True


def bare_converge(plan: str, playbooks: list[str], env: dict[str, str]) -> float | None:
    """Seconds of a first converge on a lab made afresh, under the strategy env names."""
    if not remake(plan):
        return None
    seconds, rc, changed, hosts = run(plan, playbooks, env)
    name = "first converge, linear strategy"
    print(f"{name:<38} {seconds:7.1f} s   rc={rc} changed={changed} hosts={hosts}")
    return seconds if rc == 0 else None


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", default="inventory/lab/cluster.yml")
    parser.add_argument(
        "--playbook",
        action="append",
        dest="playbooks",
        help="playbook(s) to converge (default: site.yml)",
    )
    parser.add_argument(
        "--bare-both",
        action="store_true",
        help="first take the lab down and make it again before a first converge under linear, "
        "then again before the first converge under mitogen_linear (the lab ends converged)",
    )
    parser.add_argument(
        "--no-defaults",
        action="store_true",
        help="skip the slow re-run with Ansible's defaults",
    )
    return parser.parse_args()


def slowest(
    per_task: float, figures: list[float], spent: dict[str, float], gated_spent: dict[str, float]
) -> None:
    """The re-runs read as tasks x what an empty task costs, and their slowest tasks."""
    gated, full = figures[1], figures[2]
    for name, tasks, total in (("in full", spent, full), ("through the gate", gated_spent, gated)):
        print(
            f"the re-run {name} ran {len(tasks)} distinct tasks: {len(tasks)} x {per_task:.2f} s"
            f" = {len(tasks) * per_task:.0f} s if each cost what an empty task costs "
            f"({len(tasks) * per_task / total:.2f} of that re-run)"
        )
    for name, tasks, total in (("in full", spent, full), ("through the gate", gated_spent, gated)):
        print(f"the re-run {name}: its {TOP} slowest tasks (wall time, all hosts together):")
        for task, seconds in sorted(tasks.items(), key=lambda kv: kv[1], reverse=True)[:TOP]:
            print(f"  {seconds:7.1f} s  {100 * seconds / total:5.1f} %  {task}")


def main() -> int:
    args = arguments()
    playbooks = args.playbooks or ["site.yml"]
    if os.geteuid() != 0:
        print("bench_converge: skipped, the lab needs root")
        return 0
    bare_linear = None
    if args.bare_both:
        bare_linear = bare_converge(args.plan, playbooks, LINEAR)
        if bare_linear is None:
            return 1
        if not remake(args.plan):
            return 1
    up, converged = lab_state(args.plan)
    if not up:
        print(f"bench_converge: skipped, the lab is not up (cluster-plan lab up {args.plan})")
        return 0
    label = "re-run (lab was converged already)" if converged else "first converge"
    print(f"playbooks: {' '.join(playbooks)}   plan: {args.plan}")
    figures = []
    scratch = Path(tempfile.mkdtemp(prefix="bench-converge-"))
    times = scratch / "task-times.json"
    gated_times = scratch / "gated-task-times.json"

    def timed(path: Path) -> dict[str, str]:
        """The run names where its time goes (callback cluster_plan.cluster.task_times)."""
        return {
            "ANSIBLE_CALLBACKS_ENABLED": "cluster_plan.cluster.problem_summary,"
            "cluster_plan.cluster.task_times",
            "CLUSTER_PLAN_TASK_TIMES": str(path),
        }

    runs = [
        (label, None, FULL),
        ("re-run through the stage gate", timed(gated_times), None),
        ("re-run in full", timed(times), FULL),
        ("re-run in full, linear strategy", LINEAR, FULL),
    ]
    if not args.no_defaults:
        runs.append(("re-run in full, Ansible defaults", ANSIBLE_DEFAULTS, FULL))
    for name, env, extra in runs:
        seconds, rc, changed, hosts = run(args.plan, playbooks, env, extra)
        figures.append(seconds)
        print(f"{name:<38} {seconds:7.1f} s   rc={rc} changed={changed} hosts={hosts}")
        if rc != 0:
            return 1
    spent = json.loads(times.read_text())
    gated_spent = json.loads(gated_times.read_text())
    # The baseline: what one task that does nothing costs on every host of the plan, here.
    empty = scratch / "empty.yml"
    empty.write_text(EMPTY_PLAY.format(tasks=EMPTY_TASK * EMPTY_TASKS))
    costs = {}
    for strategy, env in (("mitogen_linear", None), ("linear", LINEAR)):
        seconds, rc, _, hosts = run(args.plan, [str(empty)], env)
        if rc != 0:
            shutil.rmtree(scratch)
            return 1
        costs[strategy] = seconds / EMPTY_TASKS
        print(
            f"{EMPTY_TASKS} empty tasks on {hosts} hosts, {strategy:<14} {seconds:7.1f} s   "
            f"{costs[strategy]:.2f} s per task"
        )
    shutil.rmtree(scratch)
    slowest(costs["mitogen_linear"], figures, spent, gated_spent)
    gated, full = figures[1], figures[2]
    load = os.getloadavg()[0]
    print(f"in full / through the gate: {full / gated:.2f}x")
    print(f"linear / mitogen_linear, in full: {figures[3] / full:.2f}x")
    if bare_linear is not None:
        print(f"linear / mitogen_linear, first converge: {bare_linear / figures[0]:.2f}x")
    if not args.no_defaults:
        print(f"defaults / tuned, in full: {figures[4] / full:.2f}x")
    print(f"(goal for the re-run: < 60 s; load average {load:.1f} on {os.cpu_count()} CPUs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
