"""What every step of a change is given: the two plans, the executor into the hosts (SSH on a
real cluster, the lab's nodes), the log people read, and the waits. The runner
(`runner.Context`) says how long each wait may last; the steps only ask."""

from __future__ import annotations

import abc
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from cluster_plan.day2.change.playbooks import Playbooks, locate
from cluster_plan.kubernetes.kubeadm import ADMIN_KUBECONFIG
from cluster_plan.plan.contract import ExpandedPlan, Host
from cluster_plan.transport.execution import CommandResult, Executor

CHECK_TIMEOUT_S = 180
KUBECONFIG = ADMIN_KUBECONFIG


class StepFailed(Exception):
    """A step could not be carried out; the message says what was seen and what to do."""


@dataclass
class StepContext(abc.ABC):
    old: ExpandedPlan
    new: ExpandedPlan
    new_path: Path
    executor: Executor
    lab: bool
    log: TextIO = sys.stdout
    ansible_args: list[str] = field(default_factory=list)
    check_timeout_s: float = CHECK_TIMEOUT_S
    state_dir: Path = Path("reports")
    sleep: Callable[[float], None] = time.sleep
    # the stage playbooks (`--playbooks`, the checkout's or the installed collection's)
    playbooks: Playbooks = field(default_factory=lambda: locate(None))

    @property
    @abc.abstractmethod
    def poll_s(self) -> float:
        """Between two looks at what a wait waits for."""

    @property
    @abc.abstractmethod
    def provision_timeout_s(self) -> int:
        """How long a new or re-provisioned host has to answer."""

    @property
    @abc.abstractmethod
    def osd_empty_timeout_s(self) -> float:
        """How long Ceph has to move data off OSDs, and to be healthy again."""

    def host(self, name: str) -> Host:
        hosts = self.new["hosts"] if name in self.new["hosts"] else self.old["hosts"]
        return hosts[name]

    def first(self, role: str) -> str | None:
        """The first host of a role in the plan that has it (the new one first)."""
        for plan in (self.new, self.old):
            members = [h for h, s in plan["hosts"].items() if role in s["roles"]]
            if members:
                return members[0]
        return None

    def sh(self, node: str, script: str, timeout: float = 120) -> CommandResult:
        return self.executor.run(node, ["sh", "-c", script], timeout)

    def must(self, node: str, script: str, timeout: float = 120) -> str:
        result = self.sh(node, script, timeout)
        if result.rc != 0:
            raise StepFailed(
                f"on {node}: `{script}` exited {result.rc}: "
                f"{(result.stderr or result.stdout).strip()[-600:]}"
            )
        return result.stdout

    def say(self, text: str) -> None:
        print(text, file=self.log, flush=True)

    def wait(self, what: str, timeout: float, probe: Callable[[], str | None]) -> None:
        """Poll `probe` (None when done, else what is still pending) until done or timeout."""
        deadline = time.monotonic() + timeout
        pending = probe()
        while pending is not None:
            if time.monotonic() >= deadline:
                raise StepFailed(f"{what}: still {pending} after {timeout:g} s")
            self.sleep(self.poll_s)
            pending = probe()

    @property
    def scheduler(self) -> str:
        """The new plan's scheduler: slurm, kubernetes or none."""
        scheduler = self.new["scheduler"]
        return str(scheduler["type"]) if scheduler else "none"

    def controller(self) -> str:
        """The host the scheduler's commands run on."""
        role = "slurm_controller" if self.scheduler == "slurm" else "k8s_control_plane"
        node = self.first(role)
        if node is None:
            raise StepFailed(f"the plan has no {role} to run scheduler commands on")
        return node


def kubectl(args: str) -> str:
    return f"KUBECONFIG={KUBECONFIG} kubectl {args}"
