"""An example distributed training job for the plan's training class: what `srun torchrun`
is to a Slurm plan, as Kubernetes objects a user applies with kubectl.

For a plan whose training class gets a `pytorch` build (`software`, docs/software.md), in the
image the plan names (`scheduler.kubernetes.training_image`), else, for a Debian build, in
the offline bundle's training image (Debian's packages and the project's collectives and
training program, the one the Slurm job runs; through the plan's mirror):

- with the plan's image only, a ConfigMap with a small DDP script: a few steps of a linear
  model over every rank, then a check that all ranks ended with the same weights (the
  gradients were all-reduced); the bundle's image runs its own program, as the Slurm job
  does (`cluster-plan-collectives.pyz train`: the loss, and every rank's weights digest);
- a headless Service over the job's pods, so that pod `<job>-<index>` resolves as
  `<job>-<index>.<service>` from the moment it exists (`publishNotReadyAddresses`: the pods
  have no readiness probe to wait for);
- an Indexed Job of N pods (N = 2, or the class's nodes if fewer), one per node, each running
  `torchrun` with its completion index as its node rank, the GPUs of a node (CUDA builds) or
  one process (CPU builds).

The pods declare the training class and nothing else of the routing: the plan's admission
policy (admission.py) gives them its pool's nodeSelector, toleration, priority and RuntimeClass
as it does every pod.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cluster_plan.kubernetes import names
from cluster_plan.kubernetes.bundle.artifacts import training_image
from cluster_plan.kubernetes.bundle.project import TRAINING_PROGRAM, TrainingBuild
from cluster_plan.kubernetes.cluster import KubernetesPlan, WorkloadClass, settings
from cluster_plan.kubernetes.nodes import node_capacity

Document = dict[str, Any]

TRAINING_CLASS = "training"
JOB = "cluster-plan-training"
SERVICE = JOB  # the pods' subdomain
SCRIPT_CONFIG_MAP = f"{JOB}-script"
SCRIPT_DIR = "/opt/cluster-plan"
SCRIPT = "ddp_check.py"
RENDEZVOUS_PORT = 29500  # torchrun's default master port
DEFAULT_NODES = 2
# Inside a pod the only interface besides lo is Calico's eth0: the plan's host networks are
# not visible there, so the collectives are pinned to the pod network, which carries them
# between nodes over the plan's node network.
POD_INTERFACE = "eth0"
_APP_LABEL = "app.kubernetes.io/name"
_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
_LABELS = {_APP_LABEL: JOB, **names.MANAGED_BY}
_SCRIPT_VOLUME = {"name": "script", "configMap": {"name": SCRIPT_CONFIG_MAP}}

DDP_CHECK = '''\
"""A few DDP steps on every rank, then a check that all ranks hold the same weights."""

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

backend = os.environ["TRAINING_BACKEND"]
dist.init_process_group(backend=backend)
rank, world = dist.get_rank(), dist.get_world_size()
if backend == "nccl":
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(device)
else:
    device = torch.device("cpu")
torch.manual_seed(rank)  # different data on every rank
model = DistributedDataParallel(
    torch.nn.Linear(16, 1).to(device), device_ids=[device] if backend == "nccl" else None
)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(10):
    x = torch.randn(32, 16, device=device)
    loss = (model(x) - x.sum(dim=1, keepdim=True)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
weights = torch.cat([p.detach().flatten() for p in model.parameters()])
gathered = [torch.zeros_like(weights) for _ in range(world)]
dist.all_gather(gathered, weights)
assert all(torch.equal(g, weights) for g in gathered), "ranks disagree on the weights"
print(f"rank {rank} of {world} ({backend}): loss {loss.item():.4f}, weights agree", flush=True)
dist.destroy_process_group()
'''


@dataclass(frozen=True)
class TrainingJob:
    workload_class: str
    image: str
    nodes: int  # pods, one per node
    processes_per_node: int
    gpus_per_node: int  # 0: a CPU build, which cannot use the GPUs it would hold
    backend: str  # nccl between GPUs, gloo on CPUs
    program: bool = False  # the bundle's image: its own program, not the ConfigMap's script

    @property
    def master(self) -> str:
        """Pod 0 of the job under its headless Service."""
        return f"{JOB}-0.{SERVICE}"


def training_class(plan: KubernetesPlan) -> WorkloadClass | None:
    """The class named `training`, else the first that needs GPUs (among classes with nodes)."""
    if TRAINING_CLASS in plan.classes:
        return plan.classes[TRAINING_CLASS]
    return next((c for c in plan.classes.values() if c.needs == "gpu"), None)


def _builds(plan: KubernetesPlan, wclass: WorkloadClass) -> list[dict[str, Any]]:
    return [(plan.host(n).get("software") or {}).get("pytorch") or {} for n in wclass.nodes]


def bundle_training(plan: KubernetesPlan) -> TrainingBuild | None:
    """The Debian build whose image the bundle makes for the job: the plan names no image of
    its own and every node of the training class gets one Debian CPU build."""
    wclass = training_class(plan)
    if wclass is None or settings(plan.expanded).get("training_image"):
        return None
    found = {
        (str(b["version"]), tuple(b["packages"]))
        for b in _builds(plan, wclass)
        if b and b.get("source") == "debian" and b.get("build") == "cpu"
    }
    if len(found) != 1 or not all(_builds(plan, wclass)):
        return None
    ((version, packages),) = found
    return TrainingBuild(version, packages)


def training_job(plan: KubernetesPlan) -> TrainingJob | None:
    """The job the plan can run, or None: no training class, a training class whose nodes do
    not all get a pytorch build, no image (the plan's, or the bundle's for a Debian build), or
    a CUDA build on shared GPUs."""
    wclass = training_class(plan)
    image = settings(plan.expanded).get("training_image")
    bundled = bundle_training(plan)
    if bundled is not None:
        image = training_image(bundled).reference
    if wclass is None or not image:
        return None
    builds = _builds(plan, wclass)
    if not all(builds):
        return None
    # validate refuses a CUDA build on a host without an NVIDIA GPU, so every node has one here
    cuda = all(b["build"] == "cuda" for b in builds)
    if cuda and plan.gpu_sharing.get("mode", "none") != "none":
        # NCCL wants a whole GPU per rank: time-slicing may give two ranks the same GPU, and
        # MIG instances have no peer-to-peer path between them
        return None
    gpus = min(node_capacity(plan.host(n)).get(names.NVIDIA_GPU, 0) for n in wclass.nodes)
    gpus = gpus if cuda else 0
    return TrainingJob(
        workload_class=wclass.name,
        image=str(image),
        nodes=min(DEFAULT_NODES, len(wclass.nodes)),
        processes_per_node=max(gpus, 1),
        gpus_per_node=gpus,
        backend="nccl" if gpus else "gloo",
        program=bundled is not None,
    )


def torchrun_command(job: TrainingJob) -> list[str]:
    """torchrun's static rendezvous, not c10d: an Indexed Job already gives each pod a fixed
    rank (its completion index) and pod 0 a fixed name, which is all a static rendezvous needs;
    rank 0 hosts the store because it is rank 0. c10d would ignore --node-rank, hand out ranks
    by arrival, and host the store on whichever pod finds the endpoint's name among its own,
    which a subdomain name is not reliably; and a Job of a fixed size has no use for its
    elasticity. The options are spelt with `_`: torch 2 accepts both spellings, torch 1.13
    (Debian 12's) only that one.

    The bundle's image runs the Slurm job's program with its launcher options
    (data/train-ddp.sbatch): `--redirects 2 --tee 2`, since torch 1.13 on Python 3.11 cannot
    parse their default 0."""
    options = [
        f"--nnodes={job.nodes}",
        f"--nproc_per_node={job.processes_per_node}",
        "--node_rank=$(JOB_COMPLETION_INDEX)",
        f"--master_addr={job.master}",
        f"--master_port={RENDEZVOUS_PORT}",
    ]
    if job.program:
        launcher = ["python3", "-m", "torch.distributed.run", "--redirects", "2", "--tee", "2"]
        return [*launcher, *options, TRAINING_PROGRAM, "train", "--backend", job.backend]
    return ["torchrun", *options, f"{SCRIPT_DIR}/{SCRIPT}"]


def _container(job: TrainingJob) -> Document:
    container: Document = {
        "name": "torchrun",
        "image": job.image,
        "command": torchrun_command(job),
        "env": [
            # defined here, not left to the Job controller, so $(JOB_COMPLETION_INDEX) in the
            # command is always expanded
            {
                "name": "JOB_COMPLETION_INDEX",
                "valueFrom": {
                    "fieldRef": {"fieldPath": f"metadata.annotations['{_INDEX_ANNOTATION}']"}
                },
            },
            *([] if job.program else [{"name": "TRAINING_BACKEND", "value": job.backend}]),
            {"name": "NCCL_SOCKET_IFNAME", "value": POD_INTERFACE},
            {"name": "GLOO_SOCKET_IFNAME", "value": POD_INTERFACE},
        ],
        "ports": [{"name": "rendezvous", "containerPort": RENDEZVOUS_PORT, "protocol": "TCP"}],
        "volumeMounts": [
            *(
                []
                if job.program
                else [{"name": "script", "mountPath": SCRIPT_DIR, "readOnly": True}]
            ),
            {"name": "shm", "mountPath": "/dev/shm"},  # NCCL and data loaders outgrow 64 MiB
        ],
    }
    if job.gpus_per_node:
        # extended resources are limits only (the request follows); routing reads them too
        container["resources"] = {"limits": {names.NVIDIA_GPU: job.gpus_per_node}}
    return container


def _pod_template(job: TrainingJob) -> Document:
    labels = {**_LABELS, names.CLASS_LABEL: job.workload_class}
    return {
        "metadata": {"labels": labels},
        "spec": {
            "subdomain": SERVICE,
            "restartPolicy": "Never",
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "labelSelector": {"matchLabels": {_APP_LABEL: JOB}},
                            "topologyKey": "kubernetes.io/hostname",
                        }
                    ]
                }
            },
            "containers": [_container(job)],
            "volumes": [
                *([] if job.program else [_SCRIPT_VOLUME]),
                {"name": "shm", "emptyDir": {"medium": "Memory"}},
            ],
        },
    }


def training_objects(plan: KubernetesPlan) -> list[Document]:
    """The ConfigMap (with the plan's image), the headless Service and the Indexed Job; none
    when the plan has no job.
    Without a namespace: they go where the user applies them (their team's namespace)."""
    job = training_job(plan)
    if job is None:
        return []
    script = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": SCRIPT_CONFIG_MAP, "labels": dict(_LABELS)},
        "data": {SCRIPT: DDP_CHECK},
    }
    return [
        *([] if job.program else [script]),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": SERVICE, "labels": dict(_LABELS)},
            "spec": {
                "clusterIP": "None",
                "selector": {_APP_LABEL: JOB},
                "publishNotReadyAddresses": True,
                "ports": [{"name": "rendezvous", "port": RENDEZVOUS_PORT, "protocol": "TCP"}],
            },
        },
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": JOB, "labels": dict(_LABELS)},
            "spec": {
                "completionMode": "Indexed",
                "completions": job.nodes,
                "parallelism": job.nodes,
                # a rank that fails cannot rejoin a static rendezvous: the run fails with it
                "backoffLimit": 0,
                "template": _pod_template(job),
            },
        },
    ]
