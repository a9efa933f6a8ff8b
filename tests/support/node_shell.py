"""A command inside a lab node, run as `cluster-plan lab run PLAN NODE -- COMMAND` runs it
(nsenter into the node's init: its namespaces, root and working directory; the exit status 0,
or 1 for any failure), without a Python process of its own per command.

Why: the lab tests run a great many of these, most in loops that poll a node every second or
two, and the CLI's own start (imports, the plan) took about 0.4 s of each on a quiet machine
against 3 ms for nsenter itself. Whatever is out of the ordinary (no lab id in the
environment, a plan that does not load, a node not in the plan or not running) goes through
the CLI, so its message and exit status are the CLI's; `tests/lab/test_lab_e2e.py` runs the
CLI's `lab run` itself.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from cluster_plan.cli.policy import CommandError
from cluster_plan.lab import node, state
from cluster_plan.lab.command import load_plan
from cluster_plan.lab.names import LabNames, lab_id
from cluster_plan.lab.proc import ProcRef
from cluster_plan.plan.contract import ExpandedPlan
from cluster_plan.plan.findings import PlanError

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_PLAN = Path(sys.executable).parent / "cluster-plan"

# plan file -> its (mtime_ns, size) and the expanded plan: a test writes a plan once
_PLANS: dict[str, tuple[tuple[int, int], ExpandedPlan]] = {}


def _expanded(plan: Path) -> ExpandedPlan | None:
    try:
        stat = plan.stat()
        key = (stat.st_mtime_ns, stat.st_size)
        cached = _PLANS.get(str(plan))
        if cached is None or cached[0] != key:
            cached = (key, load_plan(str(plan)))
            _PLANS[str(plan)] = cached
    except (CommandError, PlanError, OSError, ValueError):
        return None  # the CLI says what is wrong with it
    return cached[1]


def _running_init(plan: Path, host: str, env: Mapping[str, str]) -> ProcRef | None:
    """The node's init when the plan names the host and the lab runs it; else None."""
    expanded = _expanded(plan)
    if expanded is None or host not in expanded["hosts"]:
        return None
    try:
        current = state.load(LabNames(lab_id(expanded, env)).state_file)
    except (CommandError, OSError, ValueError):
        return None
    init = current.nodes.get(host) if current is not None else None
    return init if init is not None and init.alive() else None


def lab_run(
    plan: Path,
    host: str,
    argv: list[str],
    env: Mapping[str, str],
    timeout: float,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """`cluster-plan lab run PLAN HOST -- ARGV` with `env` (and `stdin`), its output captured
    as text."""
    init = _running_init(plan, host, env)
    if init is None:
        command = [str(CLUSTER_PLAN), "lab", "run", str(plan), host, "--", *argv]
    else:
        command = node.nsenter(init, argv)
    done = subprocess.run(
        command,
        cwd=ROOT,
        env=dict(env),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if init is not None and done.returncode != 0:
        done.returncode = 1  # as the CLI exits for a command that failed in the node
    return done
