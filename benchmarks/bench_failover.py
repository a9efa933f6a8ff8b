"""Failover figures on a converged lab (docs/reliability.md): how long the backup controller
takes to be in control after the primary's slurmctld dies and after the primary's whole node
is cut off (and the primary to take control back), how long a lost compute node takes
to be set DOWN and to come back, each against a baseline measured in the same run with
everything up.

    CLUSTER_PLAN_LAB_ID=ID .venv/bin/cluster-plan lab up inventory/lab/cluster.yml
    CLUSTER_PLAN_LAB_ID=ID .venv/bin/ansible-playbook -i inventory/lab/cluster.yml site.yml
    CLUSTER_PLAN_LAB_ID=ID .venv/bin/python benchmarks/bench_failover.py [--plan PLAN]
        [--node NODE] [--rounds 5] [--faults kill,down,freeze,compute]

(or any lab a `pytest -m lab` session converged and left up with CLUSTER_PLAN_LAB_CONVERGED=1).
Prints figures; asserts nothing about time. Needs root and a converged lab whose plan has an
HA pair; says so and exits 0 without them, so `make bench` runs anywhere. It kills the
primary's slurmctld, cuts the primary's links and one compute node's, then puts them back:
run it on a lab.

Every time is read inside the nodes (`date +%s.%N`: the nodes share this machine's clock),
so the cost of reaching a node from here is not in the figures. Polls run every 0.2 s, each
query bounded to 1 s: figures are good to about a second.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
NOW = "date +%s.%N"


def run(*argv: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    return subprocess.run(
        list(argv), cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def on_node(plan: str, host: str, script: str, timeout: float = 900) -> str:
    done = run(str(BIN / "cluster-plan"), "lab", "run", plan, host, "--", "sh", "-c", script,
               timeout=timeout)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{host}: {script}: {(done.stderr or done.stdout).strip()[-400:]}")
    return done.stdout


def stamps(out: str) -> list[float]:
    """The `date +%s.%N` lines a node script printed."""
    return [float(line) for line in out.split() if re.fullmatch(r"\d+\.\d+", line)]


def until(condition: str, limit_s: float) -> str:
    """A shell loop that polls CONDITION every 0.2 s (each try bounded to 1 s), then prints
    the time it held; exits 1 after LIMIT_S."""
    tries = int(limit_s / 0.2)
    return (
        f"for i in $(seq {tries}); do if timeout 1 sh -c {_quote(condition)} >/dev/null 2>&1; "
        f"then {NOW}; exit 0; fi; sleep 0.2; done; exit 1"
    )


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def median_of(plan: str, host: str, command: str, rounds: int) -> float:
    """Median seconds of COMMAND on HOST over ROUNDS runs, timed inside the node."""
    script = "; ".join(f"{NOW}; {command} >/dev/null; {NOW}" for _ in range(rounds))
    times = stamps(on_node(plan, host, script))
    return statistics.median(b - a for a, b in zip(times[::2], times[1::2], strict=True))


def lab_ready(plan: str) -> dict[str, Any] | None:
    from cluster_plan.api import load_expanded

    expanded = load_expanded(plan)
    scheduler = expanded["scheduler"] or {}
    if scheduler.get("type") != "slurm" or len(expanded["groups"].get("slurm_controller", [])) != 2:
        print("bench_failover: the plan has no HA pair of Slurm controllers; nothing to measure")
        return None
    if run(str(BIN / "cluster-plan"), "lab", "status", plan).returncode != 0:
        print("bench_failover: the lab is not up (cluster-plan lab up PLAN, then site.yml)")
        return None
    client = expanded["groups"]["slurm_compute"][0]
    probe = run(str(BIN / "cluster-plan"), "lab", "run", plan, client, "--", "scontrol", "ping")
    if "is UP" not in probe.stdout:
        print("bench_failover: Slurm does not answer in the lab; converge it with site.yml first")
        return None
    return expanded


SUBMIT = "sbatch --parsable --hold -p general -t 1 --wrap true"


def ha_pair(expanded: dict[str, Any]) -> tuple[str, str, str, int]:
    """The pair's primary and backup (plan order), the client the figures are read on (the
    first compute node) and SlurmctldTimeout."""
    group = set(expanded["groups"]["slurm_controller"])
    primary, backup = [h for h in expanded["hosts"] if h in group]
    client = expanded["groups"]["slurm_compute"][0]
    return primary, backup, client, expanded["scheduler"]["slurm"]["controller_timeout_s"]


def controller_takeover(plan: str, expanded: dict[str, Any], rounds: int) -> None:
    primary, backup, client, timeout = ha_pair(expanded)
    run_job = "srun -p general -t 1 true"

    ping = median_of(plan, client, "scontrol ping", rounds)
    accept = median_of(plan, client, SUBMIT, rounds)
    turnaround = median_of(plan, client, run_job, rounds)
    on_node(plan, client, "scancel --state=PENDING --user=root --partition=general")
    print(f"baseline, both controllers up ({rounds} rounds, medians):")
    print(f"  scontrol ping round trip                 {ping:7.2f} s")
    print(f"  sbatch accepted                          {accept:7.2f} s")
    print(f"  srun true, submit to exit                {turnaround:7.2f} s")

    try:
        killed = stamps(on_node(plan, primary, f"{NOW}; systemctl kill --signal=SIGKILL slurmctld"))
        # In control means answering queries: a backup in standby refuses them.
        answered = stamps(on_node(plan, client, until("squeue -h -o %i", timeout * 4)))
        accepted = stamps(on_node(plan, client, f"{NOW}; {SUBMIT}; {NOW}"))
        ran = stamps(on_node(plan, client, f"{NOW}; {run_job}; {NOW}"))
        on_node(plan, client, "scancel --state=PENDING --user=root --partition=general")
    finally:
        started = stamps(
            on_node(
                plan, primary, f"systemctl reset-failed slurmctld; {NOW}; systemctl start slurmctld"
            )
        )
    # The primary, started, asks the backup to hand over (it saves the state and goes back to
    # standby), reads the state and answers.
    back = stamps(
        on_node(plan, client, until(f"scontrol ping | grep -q 'at {primary} is UP'", 300))
    )
    ran_again = stamps(on_node(plan, client, f"{NOW}; {run_job}; {NOW}"))
    print(f"primary's slurmctld killed ({primary}; backup {backup}, SlurmctldTimeout {timeout} s):")
    print(f"  backup in control (answers squeue)       {answered[0] - killed[0]:7.2f} s")
    print(f"  killed -> first job accepted             {accepted[1] - killed[0]:7.2f} s")
    print(f"  a job accepted during the outage         {accepted[1] - accepted[0]:7.2f} s")
    print(f"  srun true on the backup                  {ran[1] - ran[0]:7.2f} s")
    print(f"  primary started -> scontrol ping UP      {back[0] - started[0]:7.2f} s")
    print(f"  srun true after the hand-back            {ran_again[1] - ran_again[0]:7.2f} s")
    print(f"  takeover / SlurmctldTimeout              {(answered[0] - killed[0]) / timeout:7.2f}")


LOSSES = {"down": "all links down", "freeze": "hung: processes frozen, nothing sent"}


def primary_node_lost(plan: str, expanded: dict[str, Any], kind: str) -> None:
    """Every link of the primary's node down, its processes running (`down`), or the node
    hung, its processes frozen and nothing it sends delivered (`freeze`): the backup
    fences its CephFS client (slurmctld-fence) and takes over; when the node is back, the
    primary mounts again and takes control back through the hand-back."""
    primary, backup, client, timeout = ha_pair(expanded)
    log = "/var/log/slurm/slurmctld.log"
    lines = int(on_node(plan, primary, f"wc -l < {log}").strip())
    outage = subprocess.Popen(
        [
            str(BIN / "cluster-plan"),
            "lab",
            "fault",
            plan,
            primary,
            f"--{kind}",
            "--duration",
            "900",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert outage.stdout is not None
        outage.stdout.readline()  # "NODE: link down" / "hung ...": from here
        cut = time.time()
        # Each try may wait on the lost primary first (Slurm's clients try it before the
        # backup), so tries are not bounded to a second as in `until`.
        tries = f"for i in $(seq {timeout * 10}); do timeout 120 {SUBMIT} && {{ {NOW}; exit 0; }}; "
        accepted = stamps(on_node(plan, client, tries + "sleep 1; done; exit 1"))
    finally:
        run(str(BIN / "cluster-plan"), "lab", "fault", plan, primary, "--clear")
        restored = time.time()
        outage.terminate()
        outage.wait(timeout=60)
    # In control again: the primary's log says so after the hand-back, and both answer.
    primary_back = f"tail -n +{lines + 1} {log} | grep -q 'Running as primary controller'"
    back = stamps(on_node(plan, primary, until(primary_back, 600)))
    both = stamps(on_node(plan, client, until("test $(scontrol ping | grep -c 'is UP') = 2", 300)))
    on_node(plan, client, "scancel --state=PENDING --user=root --partition=general")
    print(f"primary's node {primary} lost ({LOSSES[kind]}; backup {backup}):")
    print(f"  node lost -> first job accepted          {accepted[0] - cut:7.2f} s")
    print(f"  first job / SlurmctldTimeout             {(accepted[0] - cut) / timeout:7.2f}")
    print(f"  node back -> primary in control          {back[0] - restored:7.2f} s")
    print(f"  node back -> both controllers UP         {both[0] - restored:7.2f} s")


def node_lost(plan: str, expanded: dict[str, Any], node: str | None) -> None:
    client = expanded["groups"]["slurm_compute"][0]
    timeout = expanded["scheduler"]["slurm"]["node_timeout_s"]
    node = node or [h for h in expanded["groups"]["slurm_compute"] if h != client][-1]
    state = f"sinfo -h -N -n {node} -o %T"
    query = median_of(plan, client, state, 5)
    print(
        f"baseline: sinfo of one node                {query:7.2f} s   (SlurmdTimeout {timeout} s)"
    )

    outage = subprocess.Popen(
        [str(BIN / "cluster-plan"), "lab", "fault", plan, node, "--down", "--duration",
         str(timeout * 3 + 30)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    try:
        assert outage.stdout is not None
        outage.stdout.readline()  # "NODE: link down" / "hung ...": from here
        cut = time.time()
        down = stamps(on_node(plan, client, until(f"{state} | grep -q '^down'", timeout * 3)))
        rest, _ = outage.communicate(timeout=timeout * 3 + 120)
        restored = time.time()
    finally:
        if outage.poll() is None:
            run(str(BIN / "cluster-plan"), "lab", "fault", plan, node, "--clear")
            outage.kill()
    # back at slurmctld's next registration request: every 21 pings, SlurmdTimeout/3 apart
    idle = stamps(on_node(plan, client, until(f"{state} | grep -qx idle", timeout * 15)))
    print(f"compute node {node} cut off (all links down):")
    print(f"  set DOWN by Slurm                        {down[0] - cut:7.2f} s")
    print(f"  detection / SlurmdTimeout                {(down[0] - cut) / timeout:7.2f}")
    print(f"  links back -> idle again (no update)     {idle[0] - restored:7.2f} s")
    if "cleared" not in rest:
        print(f"  (the fault command said: {rest.strip()[-200:]})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", default="inventory/lab/cluster.yml")
    parser.add_argument("--node", help="the compute node to cut off (default: the last one)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each baseline")
    parser.add_argument(
        "--faults",
        default="kill,down,freeze,compute",
        help="which faults, comma-separated: kill (the primary's slurmctld), down and freeze"
        " (the primary's whole node), compute (a compute node); default: all",
    )
    args = parser.parse_args()
    chosen = set(args.faults.split(","))
    unknown = chosen - {"kill", "down", "freeze", "compute"}
    if unknown:
        parser.error(f"--faults: unknown {', '.join(sorted(unknown))}")
    if os.geteuid() != 0:
        print("bench_failover: needs root (the lab); nothing measured")
        return 0
    expanded = lab_ready(args.plan)
    if expanded is None:
        return 0
    print(f"lab {os.environ.get('CLUSTER_PLAN_LAB_ID', expanded['cluster']['name'])}")
    if "kill" in chosen:
        controller_takeover(args.plan, expanded, args.rounds)
    for kind in ("down", "freeze"):
        if kind in chosen:
            primary_node_lost(args.plan, expanded, kind)
    if "compute" in chosen:
        node_lost(args.plan, expanded, args.node)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
