"""Slurm's client commands as this project asks them: the argv of each question, and one pure
parser of each kind of answer. The change's runner, the drain, the Slurm collector, the
read-only facts (drift) and collectives acceptance all ask and read through here.

Slurm 22.05 (Debian 12) is read through fixed-field formats, not `--json`: the JSON of 22.05
comes from a data_parser plugin whose layout changed in every release since, while `-o`/`-O`
fields and `scontrol --oneliner` have kept their shape. Standard library only: the collector
runs on the nodes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A key of a `--oneliner` record: a word followed by `=` at the start or after a space.
_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:.]*)=")

# sinfo's %T carries a flag after the state's name (`drained*`, `mixed-`, `idle~`); scontrol
# marks a node that does not answer the same way (`IDLE*+DRAIN`).
SUFFIX_FLAGS = {
    "*": "NOT_RESPONDING",
    "~": "POWERED_DOWN",
    "#": "POWERING_UP",
    "!": "POWER_DOWN",
    "%": "POWERING_DOWN",
    "$": "MAINTENANCE",
    "@": "REBOOT_REQUESTED",
    "^": "REBOOT_ISSUED",
    "-": "PLANNED",
}
# The base states in which a node runs a job sent to it now, and the one flag that does not
# stand in the way (the backfill scheduler has planned it for a job).
TAKES_JOBS = frozenset({"IDLE", "MIXED", "ALLOCATED"})
HARMLESS_FLAGS = frozenset({"PLANNED"})
# A node Slurm may schedule on: anything else (DOWN, DRAIN, FAIL, NOT_RESPONDING, ...) is out.
IN_SERVICE = frozenset({"IDLE", "ALLOCATED", "MIXED", "COMPLETING", "RESERVED", "PLANNED"})
OUT_OF_SERVICE_FLAGS = frozenset(
    {"DRAIN", "DRAINING", "DRAINED", "FAIL", "NOT_RESPONDING", "POWERED_DOWN"}
)

# Where a job has ended (Slurm's job states); any other state is waited through.
JOB_ENDED = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
     "BOOT_FAIL", "DEADLINE"}
)  # fmt: skip


class UnexpectedLine(ValueError):
    """A line of a command's output that is not one of its records."""

    def __init__(self, number: int, line: str) -> None:
        super().__init__(f"line {number}: unexpected {line[:80]!r}")
        self.number = number
        self.line = line


@dataclass(frozen=True)
class NodeState:
    """A node's state: the base state (IDLE, MIXED, DOWN, ...) and its flags (DRAIN,
    NOT_RESPONDING, PLANNED, ...), upper case as scontrol prints them."""

    base: str
    flags: frozenset[str]

    @property
    def out_of_service(self) -> list[str]:
        """Why Slurm schedules nothing on the node: its base state when that is not one of
        IN_SERVICE, and its flags of OUT_OF_SERVICE_FLAGS; [] for a node in service."""
        flags = sorted(self.flags & OUT_OF_SERVICE_FLAGS)
        return [self.base, *flags] if self.base not in IN_SERVICE or flags else []

    @property
    def takes_jobs(self) -> bool:
        """A job sent to the node now starts there: idle, mixed or allocated, answering,
        powered, neither drained nor rebooting."""
        return self.base in TAKES_JOBS and self.flags <= HARMLESS_FLAGS


def node_state(text: str) -> NodeState:
    """A node's state as sinfo's %T (`mixed-`, `drained*`, `idle~`, `allocated+`) or
    scontrol's State (`IDLE*+DRAIN`) prints it."""
    base, *more = text.strip().upper().split("+")
    flags = {flag for flag in more if flag}
    while base and base[-1] in SUFFIX_FLAGS:
        flags.add(SUFFIX_FLAGS[base[-1]])
        base = base[:-1]
    return NodeState(base, frozenset(flags))


def oneliner_fields(line: str) -> dict[str, str]:
    """One record of `scontrol show ... --oneliner` (a node, a job): `Key=value ...`, where a
    value may hold spaces (a reason, the OS): it runs to the next key."""
    matches = list(_KEY.finditer(line))
    fields = {}
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
        fields[match.group(1)] = line[match.end() : end].strip()
    return fields


def node_records(text: str) -> dict[str, dict[str, str]]:
    """{node: fields} of each line of `scontrol show node --oneliner`. Slurm's "No nodes ..."
    is no record; any other line that is not one raises UnexpectedLine (a controller that does
    not answer prints its error instead)."""
    records = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.startswith("NodeName="):
            if line.strip() and not line.startswith("No nodes"):
                raise UnexpectedLine(number, line)
            continue
        fields = oneliner_fields(line)
        records[fields["NodeName"]] = fields
    return records


def show_node_argv(node: str | None = None) -> list[str]:
    """Every node, or one, a line each."""
    return ["scontrol", "show", "node", "--oneliner", *([node] if node else [])]


def show_job_argv(job: str) -> list[str]:
    return ["scontrol", "show", "job", "--oneliner", job]


def node_jobs_argv(node: str) -> list[str]:
    """The ids of the jobs on a node (running, completing or suspended there), one a line."""
    return ["squeue", "--noheader", f"--nodelist={node}", "--format=%i"]


def node_state_argv(node: str) -> list[str]:
    """sinfo's long state (%T) of one node, one line per partition it is in."""
    return ["sinfo", "--noheader", f"--nodes={node}", "--format=%T"]


def node_partition_argv(node: str) -> list[str]:
    """The partitions of one node (%P, the default one marked `*`), one a line."""
    return ["sinfo", "-h", "-N", "-n", node, "-o", "%P"]


def health_job_argv(partition: str, node: str, timeout_s: float) -> list[str]:
    """A one-minute job on the node that prints its host name: the node runs jobs again."""
    return ["timeout", f"{timeout_s:g}", "srun", f"--partition={partition}",
            f"--nodelist={node}", "--nodes=1", "--time=1", "--job-name=cluster-plan-health",
            "hostname"]  # fmt: skip


def first_partition(text: str) -> str | None:
    """The first partition an answer of `node_partition_argv` names, without the default mark."""
    words = text.split()
    return words[0].rstrip("*") if words else None


def job_exit_status(state: str, exit_code: str) -> int:
    """What `sbatch --wait` would exit with: the job's exit code; 1 when a signal ended it or
    the job did not complete (a cancelled or timed-out job may report 0:15; a failed node 0:0)."""
    code, _, signal = exit_code.partition(":")
    if signal not in ("", "0") or not code.isdigit():
        return 1
    if int(code) == 0 and state != "COMPLETED":
        return 1
    return int(code)
