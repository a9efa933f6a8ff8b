"""Training acceptance on a Kubernetes plan: the plan's distributed training Job
(cluster_plan/kubernetes/training.py), the one users are given, applied through the API server
on the first control plane, run to its end, and judged as the Slurm job is (the loss went
down, every rank ended with the same weights; collectives_verdict.judge_training). The report's
`collectives` section carries it in `training`, as for Slurm; a Kubernetes plan has no
all-reduce sweep.

The Job runs in a namespace of its own (acceptance's, no team's quota in it); a Job of an
earlier run is deleted first, and this run's once it has ended, whatever the verdict.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cluster_plan.acceptance.collectives_verdict import judge_training
from cluster_plan.kubernetes.cluster import kubernetes_plan
from cluster_plan.kubernetes.kubeadm import ADMIN_KUBECONFIG
from cluster_plan.kubernetes.training import JOB, training_class, training_job, training_objects
from cluster_plan.transport.execution import CommandResult

NAMESPACE = "cluster-plan-acceptance"
POLL_S = 2.0
# the image may be pulled on both nodes first (the bundle's: about 1 GiB unpacked)
START_S = 300

_NODE_NAMES = "jsonpath='{.items[*].spec.nodeName}'"

RunOn = Callable[[str, Sequence[str], float], CommandResult]


@dataclass(frozen=True)
class KubernetesTraining:
    control_plane: str
    pool: str
    nodes: tuple[str, ...]  # the training class's nodes: the Job's pods land on them
    ranks: int  # pods x processes per pod
    backend: str
    objects: tuple[Mapping[str, Any], ...]  # the rendered Service (ConfigMap) and Job
    timeout_s: int
    network: str  # the node network the pods' traffic crosses
    rate_scale: float  # the lab's, as the report states it for Slurm's sweeps


def _first_control_plane(expanded: Mapping[str, Any]) -> str | None:
    scheduler = expanded.get("scheduler") or {}
    controls = list((expanded.get("groups") or {}).get("k8s_control_plane") or [])
    return str(controls[0]) if scheduler.get("type") == "kubernetes" and controls else None


def k8s_training_spec(
    expanded: Mapping[str, Any], nodes: Sequence[str] | None = None
) -> KubernetesTraining | str | None:
    """What the phase runs; a reason (str) where the plan's job cannot cross the network;
    None for a plan it does not apply to (not Kubernetes, no training job)."""
    control_plane = _first_control_plane(expanded)
    if control_plane is None:
        return None
    plan = kubernetes_plan(expanded)
    job, wclass = training_job(plan), training_class(plan)
    if job is None or wclass is None:
        return None
    members = tuple(n for n in wclass.nodes if nodes is None or n in nodes)
    if job.nodes < 2 or len(members) < job.nodes:
        return "one node: nothing crosses the network"
    rules = (expanded.get("acceptance") or {}).get("collectives") or {}
    return KubernetesTraining(
        control_plane=control_plane,
        pool=str(expanded["hosts"][members[0]].get("pool") or wclass.name),
        nodes=members,
        ranks=job.nodes * job.processes_per_node,
        backend=job.backend,
        objects=tuple(training_objects(plan)),
        timeout_s=int(rules.get("timeout_s", 600)),
        network=plan.node_network,
        rate_scale=float((expanded.get("lab") or {}).get("rate_scale") or 1.0),
    )


def _shell(script: str) -> list[str]:
    return ["sh", "-c", f"set -e; export KUBECONFIG={ADMIN_KUBECONFIG}; {script}"]


@dataclass
class TrainingOnKubernetes:
    spec: KubernetesTraining
    run: RunOn
    progress: Callable[[str], None]
    sleep: Callable[[float], None] = time.sleep

    def kubectl(self, arguments: str, timeout: float = 120) -> CommandResult:
        script = f"kubectl --namespace {NAMESPACE} {arguments}"
        return self.run(self.spec.control_plane, _shell(script), timeout)

    def job(self) -> dict[str, Any]:
        started = time.monotonic()
        self.progress(f"training: DistributedDataParallel Job on the pool {self.spec.pool}")
        documents = json.dumps({"apiVersion": "v1", "kind": "List", "items": self.spec.objects})
        namespace = json.dumps(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
        self.kubectl(f"delete job {JOB} --ignore-not-found --wait=true --timeout=120s", 180)
        # JSON is one line: the here-documents' end lines cannot occur in it
        applied = self.run(
            self.spec.control_plane,
            _shell(
                f"kubectl apply -f - <<'JSON'\n{namespace}\nJSON\n"
                f"kubectl --namespace {NAMESPACE} apply -f - <<'JSON'\n{documents}\nJSON\n"
            ),
            120,
        )
        if applied.rc != 0:
            return self.verdict("", (applied.stderr or applied.stdout), applied.rc or 1, started)
        state = self.wait()
        logs = self.kubectl(f"logs --selector job-name={JOB} --tail=-1 --prefix=false", 120)
        placed = self.kubectl(f"get pods --selector job-name={JOB} --output {_NODE_NAMES}")
        self.kubectl(f"delete job {JOB} --ignore-not-found --wait=false")
        output = logs.stdout or logs.stderr
        if state != "Complete":
            output = f"{output}\njob {JOB}: {state}"
        verdict = self.verdict(JOB, output, 0 if state == "Complete" else 1, started)
        if placed.rc == 0 and placed.stdout.split():
            verdict["nodes"] = sorted(placed.stdout.split())  # where its pods ran
        return verdict

    def verdict(self, job: str, output: str, status: int, started: float) -> dict[str, Any]:
        verdict = judge_training(self.spec, job, output, status)
        verdict["scheduler"] = "kubernetes"
        verdict["seconds"] = round(time.monotonic() - started, 1)
        return verdict

    def wait(self) -> str:
        """Complete, Failed, or what it was when the bound ran out (the Job is deleted then)."""
        deadline = time.monotonic() + START_S + self.spec.timeout_s
        conditions = '{range .status.conditions[?(@.status=="True")]}{.type} {end}'
        seen = "not started"
        while time.monotonic() < deadline:
            shown = self.kubectl(f"get job {JOB} --output jsonpath={shlex.quote(conditions)}")
            if shown.rc == 0:
                types = shown.stdout.split()
                seen = next((t for t in ("Complete", "Failed") if t in types), "running")
                if seen != "running":
                    return seen
            self.sleep(POLL_S)
        return f"{seen} after {START_S + self.spec.timeout_s} s, deleted"


def run_k8s_training(
    spec: KubernetesTraining | str, run: RunOn, progress: Callable[[str], None]
) -> dict[str, Any]:
    """The report's collectives section for a Kubernetes plan: the training job alone."""
    if isinstance(spec, str):
        training, skipped, network, scale = [], [{"pool": "training", "reason": spec}], "", 1.0
    else:
        training, skipped = [TrainingOnKubernetes(spec, run, progress).job()], []
        network, scale = spec.network, spec.rate_scale
    problems = [p for section in training for p in section["problems"]]
    return {
        "scheduler": "kubernetes",
        "network": network,
        "rate_scale": scale,
        "min_link_fraction": 0.0,  # no sweep, no floor
        "sizes": [],
        "pools": [],
        "training": training,
        "skipped": skipped,
        "problems": problems,
        "passed": not problems,
    }
