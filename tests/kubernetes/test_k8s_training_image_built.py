"""The training image as the bundle of a plan whose training job runs it built it (the lab
plan as Kubernetes, without an image of its own: `cluster-plan k8s bundle` of that plan),
read from the real cache ($CLUSTER_PLAN_CACHE or /var/cache/cluster-plan): the layout
against the manifest, Debian's torch and the project's program in it, and (as root) the
rendered job's own command run from the image's files alone: two ranks of DDP over gloo
whose loss falls and whose weights end identical. Skipped until that bundle is built; this
module never builds it (the root file system alone takes minutes)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest
from k8s_plans import lab_plan_as_kubernetes

from cluster_plan.kubernetes import render
from cluster_plan.kubernetes.bundle import built_bundle
from cluster_plan.kubernetes.bundle.builder import Bundle, verify
from cluster_plan.kubernetes.bundle.command import plan_needs
from cluster_plan.kubernetes.bundle.oci import layout_problems
from cluster_plan.kubernetes.bundle.project import TRAINING, TRAINING_PROGRAM, training_program
from cluster_plan.kubernetes.cluster import kubernetes_plan


def _expanded() -> dict[str, Any]:
    return lab_plan_as_kubernetes(lambda p: p["scheduler"]["kubernetes"].pop("training_image"))


EXPANDED = _expanded()
BUNDLE = built_bundle("1.36", needs=plan_needs(kubernetes_plan(EXPANDED)))
pytestmark = pytest.mark.skipif(
    BUNDLE is None,
    reason="the bundle with the training image is not built on this machine: "
    "cluster-plan k8s bundle of the lab plan as Kubernetes without training_image",
)


@pytest.fixture(scope="module")
def bundle() -> Bundle:
    assert BUNDLE is not None
    return BUNDLE


def _layer(bundle: Bundle) -> Path:
    layout = bundle.image_layout(TRAINING)
    index = json.loads((layout / "index.json").read_text())
    blobs = layout / "blobs" / "sha256"
    manifest = json.loads((blobs / index["manifests"][0]["digest"][7:]).read_text())
    return blobs / manifest["layers"][0]["digest"][7:]


def test_the_image_holds_debians_torch_and_the_program(bundle: Bundle) -> None:
    assert verify(bundle) == []
    assert layout_problems(bundle.image_layout(TRAINING)) == []
    (image,) = [
        a for a in bundle.manifest["artifacts"] if a["name"] == TRAINING and a["kind"] == "image"
    ]
    assert any(s.startswith("python3-torch=1.13.1") for s in image["sources"])
    assert image["sources"][-1].startswith("cluster-plan-collectives.pyz=sha256:")
    with tarfile.open(_layer(bundle)) as layer:
        program = layer.extractfile(TRAINING_PROGRAM.lstrip("/"))
        assert program is not None and program.read() == training_program()
        names = set(layer.getnames())
    assert "usr/bin/python3" in names
    assert any(n.startswith("usr/lib/python3/dist-packages/torch/") for n in names)
    assert not [n for n in names if n.startswith(("dev/", "proc/", "tmp/"))]


@pytest.mark.skipif(os.geteuid() != 0, reason="chroot and namespaces need root")
def test_the_rendered_command_trains_from_the_image_alone(bundle: Bundle, tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    with tarfile.open(_layer(bundle)) as layer:
        if hasattr(tarfile, "tar_filter"):  # the filter came with 3.11.4; 3.14 wants one
            layer.extractall(root, filter="tar")
        else:
            layer.extractall(root)
    (job,) = [o for o in render(EXPANDED).examples["training-job"] if o["kind"] == "Job"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    # the job's command on one node with two ranks: what differs is only the node count
    command = [
        a.replace("$(JOB_COMPLETION_INDEX)", "0")
        .replace("--nnodes=2", "--nnodes=1")
        .replace("--nproc_per_node=1", "--nproc_per_node=2")
        for a in container["command"]
    ]
    command = [
        a if not a.startswith("--master_addr=") else "--master_addr=127.0.0.1" for a in command
    ]
    script = tmp_path / "run.sh"
    env = "env -i PATH=/usr/bin:/bin HOME=/tmp LANG=C.UTF-8 GLOO_SOCKET_IFNAME=lo"
    script.write_text(
        f"set -e\nR={root}\nip link set lo up\n"
        'mount -t proc proc "$R/proc"\nmount -t tmpfs tmp "$R/tmp"\n'
        'mount -t tmpfs dev "$R/dev"\nmkdir "$R/dev/shm"\n'
        'for d in null zero urandom; do touch "$R/dev/$d"; mount --bind /dev/$d "$R/dev/$d"; done\n'
        f'exec chroot "$R" {env} ' + " ".join(f"'{a}'" for a in command) + "\n"
    )
    if shutil.which("unshare") is None:
        pytest.skip("unshare is missing")
    result = subprocess.run(
        ["unshare", "--mount", "--pid", "--net", "--fork", "--kill-child", "sh", str(script)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    line = next(x for x in reversed(result.stdout.splitlines()) if x.startswith("{"))
    document = json.loads(line)
    assert document["ranks"] == 2 and document["backend"] == "gloo"
    assert document["loss_went_down"] and document["last_loss"] < document["first_loss"] / 10
    assert document["identical_weights"] and len(set(document["weights_sha256"])) == 1
