"""A node lost in the middle of site.yml, on the converged session lab
(tests/roles/test_lost_node_lab.py judges it).

site.yml runs; when its storage stage starts, the last compute node's links go down for the
rest of the run (`cluster-plan lab fault NODE --down --duration N`, stopped with SIGINT when
the run ends; at the latest the fault ends by itself after N s). Once the node is back, a
second site.yml converges it. The session converge runs both after its gated re-run
(support.lab_session.converge_runs), in its slack beside the tests that need no lab: the
first run spends most of its time waiting for the lost node's connection to be given up,
which costs the machine little. Then the node is given back to Slurm as the tests after it
expect their lab: its slurmd, restarted, registers at once, where slurmctld would ask a DOWN
node again only minutes later (that return is proven by the Slurm failover tests).
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cluster_plan.lab.proc import kill_tree
from cluster_plan.plan.contract import ExpandedPlan
from support.node_shell import lab_run
from support.playbooks import BIN, REPO, Run, playbook, sigint_default
from support.waiting import wait_until

TRIGGER = "PLAY [Ceph from the cluster plan]"  # the storage stage: part-way through site.yml
RUN_TIMEOUT_S = 1800
# Down until the run ends: a node that came back by itself part-way would be met again by a
# later play (Mitogen reconnects to it), and nothing would have been lost. The bound only
# keeps the fault from outliving a run that died.
DOWN_S = RUN_TIMEOUT_S + 60
BACK_IN_SLURM_S = 120


@dataclass
class LostNode:
    """The victim, the run that lost it (None when TRIGGER never came: `error` says so), the
    run after it came back, and the victim's Slurm state once given back."""

    victim: str
    lost: Run | None = None
    again: Run | None = None
    slurm_state: str = ""
    error: str = ""


def victim_of(expanded: ExpandedPlan) -> str:
    return expanded["groups"]["slurm_compute"][-1]


def _fault(plan: Path, victim: str, *how: str) -> list[str]:
    return [str(BIN / "cluster-plan"), "lab", "fault", str(plan), victim, *how]


def site_losing(
    plan: Path,
    playbooks: list[str],
    victim: str,
    env: Mapping[str, str],
    on_start: Callable[[subprocess.Popen[str]], None],
) -> tuple[Run, bool]:
    """site.yml, taking `victim` down when TRIGGER is printed; (the run, whether it was)."""
    started = time.monotonic()
    argv = [str(BIN / "ansible-playbook"), "-i", str(plan), *playbooks]
    run = subprocess.Popen(
        argv, cwd=REPO, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    on_start(run)
    watchdog = threading.Timer(RUN_TIMEOUT_S, run.kill)  # a hung run must end too
    watchdog.start()
    fault: subprocess.Popen[str] | None = None
    lines: list[str] = []
    try:
        assert run.stdout is not None
        for line in run.stdout:
            lines.append(line)
            if fault is None and line.startswith(TRIGGER):
                fault = subprocess.Popen(
                    _fault(plan, victim, "--down", "--duration", str(DOWN_S)),
                    cwd=REPO, env=dict(env), stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL, text=True,
                    preexec_fn=sigint_default,  # stopped with SIGINT when the run ends
                )  # fmt: skip
                on_start(fault)
        rc = run.wait()
    finally:
        watchdog.cancel()
        if run.poll() is None:
            run.kill()
            run.wait()
        if run.stdout is not None:
            run.stdout.close()
        if fault is not None:
            fault.send_signal(signal.SIGINT)  # it clears the fault and exits
            try:
                fault.wait(timeout=60)
            except subprocess.TimeoutExpired:
                kill_tree(fault.pid)
                fault.wait()
            subprocess.run(
                _fault(plan, victim, "--clear"), cwd=REPO, env=dict(env),
                capture_output=True, text=True, timeout=120, check=False,
            )  # fmt: skip
    result = subprocess.CompletedProcess(argv, rc, "".join(lines), "")
    return Run(result, time.monotonic() - started), fault is not None


def slurm_state(plan: Path, controller: str, victim: str, env: Mapping[str, str]) -> str:
    done = lab_run(plan, controller, ["sinfo", "-h", "-N", "-n", victim, "-o", "%T"], env, 60)
    states = done.stdout.split()
    return states[0] if states else ""


def give_back_to_slurm(
    plan: Path, expanded: ExpandedPlan, victim: str, env: Mapping[str, str]
) -> str:
    """The victim's slurmd restarted, and its state once no longer down (or at the bound)."""
    controller = expanded["groups"]["slurm_controller"][0]
    lab_run(plan, victim, ["systemctl", "restart", "slurmd"], env, 120)
    return wait_until(
        lambda: slurm_state(plan, controller, victim, env),
        lambda state: bool(state) and not state.startswith("down"),
        BACK_IN_SLURM_S,
        step=2,
    )


def lose_and_return(
    plan: Path,
    expanded: ExpandedPlan,
    playbooks: list[str],
    env: Mapping[str, str],
    on_start: Callable[[subprocess.Popen[str]], None],
) -> LostNode:
    """Both runs and the node given back; what went wrong in `error`, never raised: the
    session converge's other runs and the tests that read them must not be lost with it."""
    found = LostNode(victim_of(expanded))
    try:
        found.lost, lost = site_losing(plan, playbooks, found.victim, env, on_start)
        if not lost:
            found.error = f"site.yml never printed {TRIGGER!r}"
            return found
        found.again = playbook(plan, playbooks, env=dict(env), on_start=on_start)
        found.slurm_state = give_back_to_slurm(plan, expanded, found.victim, env)
    except (OSError, subprocess.SubprocessError) as error:
        found.error = f"{type(error).__name__}: {error}"
    return found
