"""The Slurm collector (on the controller): node states per partition, GPUs per node, pending
jobs per partition and account, and whether slurmdbd answers.

Slurm is read through fixed-field formats, not `--json` (cluster_plan.slurm.commands says
why; its parser reads `scontrol --oneliner` and its normaliser sinfo's states). Each command's
output is parsed by a pure function; `collect_slurm` runs the commands through an injected
runner.
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from prometheus_client.metrics_core import Metric

from cluster_plan.exporters.textfile import CollectorError, family
from cluster_plan.monitoring import metrics
from cluster_plan.slurm import commands

# One line per node and partition: name | partition (default marked `*`) | long state
SINFO = ["sinfo", "--noheader", "--Node", "--format=%N|%P|%T"]
# One line per pending job (array tasks one by one): partition(s) | account
SQUEUE = ["squeue", "--noheader", "--all", "--array", "--states=PENDING", "--format=%P|%a"]
# --details adds GresUsed (the GPUs jobs hold); CfgTRES/AllocTRES only name gres/gpu when
# AccountingStorageTRES tracks it, so the counts come from Gres and GresUsed
SCONTROL = ["scontrol", "--details", "--oneliner", "show", "node"]
SACCTMGR = ["sacctmgr", "--noheader", "--parsable2", "show", "cluster"]
STATES = ("idle", "allocated", "mixed", "drained", "draining", "down")
_GPU_TRES = re.compile(r"(?:^|,)gres/gpu=(\d+)")
_GRES_DETAIL = re.compile(r"\([^)]*\)")  # (S:0-1), (IDX:0,2): socket and index lists

Runner = Callable[[Sequence[str]], tuple[int, str, str]]


def node_state(long_state: str) -> str:
    """sinfo's %T (e.g. `drained*`, `mixed-`) as one of STATES (its flag dropped), or `other`."""
    base = commands.node_state(long_state).base.lower()
    return base if base in STATES else "other"


def parse_sinfo(text: str) -> list[tuple[str, str, str]]:
    """(node, partition, state) per line of SINFO's output."""
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) != 3:
            raise CollectorError(f"sinfo: line {number}: expected node|partition|state: {line!r}")
        node, partition, state = (p.strip() for p in parts)
        rows.append((node, partition.rstrip("*"), node_state(state)))
    return rows


def parse_squeue(text: str) -> Counter[tuple[str, str]]:
    """Pending jobs per (partition, account); a job queued to several partitions counts in each."""
    pending: Counter[tuple[str, str]] = Counter()
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        partitions, sep, account = line.partition("|")
        if not sep:
            raise CollectorError(f"squeue: line {number}: expected partition|account: {line!r}")
        for partition in partitions.strip().split(","):
            pending[(partition, account.strip())] += 1
    return pending


def gres_gpus(gres: str | None) -> int:
    """GPUs in a Gres/GresUsed value: `gpu:h100:2(S:0-1),tpu:4` -> 2, `(null)` -> 0."""
    total = 0
    for item in _GRES_DETAIL.sub("", gres or "").split(","):
        name, *rest = item.strip().split(":")
        if name == "gpu":
            total += int(rest[-1]) if rest and rest[-1].isdigit() else 1
    return total


def _allocated(fields: dict[str, str]) -> int:
    if "GresUsed" in fields:
        return gres_gpus(fields["GresUsed"])
    match = _GPU_TRES.search(fields.get("AllocTRES", ""))
    return int(match.group(1)) if match else 0


def parse_scontrol_gpus(text: str) -> dict[str, tuple[int, int]]:
    """{node: (GPUs configured, GPUs allocated)} from Gres and GresUsed (AllocTRES without
    --details)."""
    try:
        records = commands.node_records(text)
    except commands.UnexpectedLine as exc:
        raise CollectorError(f"scontrol show node: {exc}") from None
    return {
        node: (gres_gpus(fields.get("Gres")), _allocated(fields))
        for node, fields in records.items()
    }


def slurm_families(
    states: list[tuple[str, str, str]],
    gpus: dict[str, tuple[int, int]],
    pending: Counter[tuple[str, str]],
    slurmdbd_up: bool,
) -> Iterator[Metric]:
    """The cluster_plan_slurm_* families (pure)."""
    state = family(metrics.SLURM_NODE_STATE)
    for node, partition, current in states:
        for name in (*STATES, "other"):
            state.add_metric([node, partition, name], 1 if name == current else 0)
    configured = family(metrics.SLURM_NODE_GPUS)
    allocated = family(metrics.SLURM_NODE_GPUS_ALLOCATED)
    for node, (total, used) in sorted(gpus.items()):
        configured.add_metric([node], total)
        allocated.add_metric([node], used)
    jobs = family(metrics.SLURM_JOBS_PENDING)
    for (partition, account), count in sorted(pending.items()):
        jobs.add_metric([partition, account], count)
    dbd = family(metrics.SLURM_SLURMDBD_UP)
    dbd.add_metric([], 1 if slurmdbd_up else 0)
    yield from (state, configured, allocated, jobs, dbd)


def run_command(argv: Sequence[str], timeout_s: float = 30.0) -> tuple[int, str, str]:
    """Run a Slurm command; (127, "", why) when it is missing or hangs."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s)
    except FileNotFoundError:
        return 127, "", f"{argv[0]}: command not found"
    except subprocess.TimeoutExpired:
        return 124, "", f"{argv[0]}: no answer in {timeout_s:.0f}s"
    return done.returncode, done.stdout, done.stderr


def _output(run: Runner, argv: Sequence[str]) -> str:
    code, out, err = run(argv)
    if code != 0:
        raise CollectorError(f"{' '.join(argv)}: exit {code}: {err.strip() or out.strip()}")
    return out


def collect_slurm(run: Runner = run_command) -> list[Any]:
    """Run the four commands and build the families; CollectorError when slurmctld's fail."""
    states = parse_sinfo(_output(run, SINFO))
    pending = parse_squeue(_output(run, SQUEUE))
    gpus = parse_scontrol_gpus(_output(run, SCONTROL))
    slurmdbd_up = run(SACCTMGR)[0] == 0  # its failure is a metric, not a collector failure
    return list(slurm_families(states, gpus, pending, slurmdbd_up))
