"""The project's device plugin as the bundle of a plan with accelerators built it, read from
the real cache ($CLUSTER_PLAN_CACHE or /var/cache/cluster-plan): its binary and image against
the manifest, and the binary reading the configurations the renderer writes, on a root with
the lab's stand-in device nodes. Skipped until `cluster-plan k8s bundle inventory/lab/k8s.yml`
has built it; this module never builds it. The plugin's gRPC side (registration,
ListAndWatch, Allocate) is tested by its Go tests (`go test` in its module)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest
from k8s_plans import lab_plan_as_kubernetes

from cluster_plan.kubernetes import render
from cluster_plan.kubernetes.bundle import BundleNeeds, built_bundle
from cluster_plan.kubernetes.bundle.builder import Bundle, verify
from cluster_plan.kubernetes.bundle.oci import layout_problems

PLUGIN = "cluster-plan-device-plugin"
BUNDLE = built_bundle("1.36", needs=BundleNeeds(device_plugin=True))
pytestmark = pytest.mark.skipif(
    BUNDLE is None,
    reason="the bundle with the device plugin is not built on this machine: "
    "cluster-plan k8s bundle inventory/lab/k8s.yml",
)


@pytest.fixture(scope="module")
def bundle() -> Bundle:
    assert BUNDLE is not None
    return BUNDLE


def artifact(bundle: Bundle, kind: str) -> dict[str, Any]:
    return next(
        a for a in bundle.manifest["artifacts"] if a["name"] == PLUGIN and a["kind"] == kind
    )


def test_the_plugin_and_its_image_are_in_the_manifest_with_digests(bundle: Bundle) -> None:
    assert verify(bundle) == []
    binary, image = artifact(bundle, "binary"), artifact(bundle, "image")
    data = bundle.binary(PLUGIN).read_bytes()
    assert binary["sha256"] == hashlib.sha256(data).hexdigest()
    assert image["reference"] == f"cluster-plan.local/{PLUGIN}:{binary['version']}"
    layout = bundle.image_layout(PLUGIN)
    assert layout_problems(layout) == []
    index = json.loads((layout / "index.json").read_text())
    blobs = layout / "blobs" / "sha256"
    manifest = json.loads((blobs / index["manifests"][0]["digest"][7:]).read_text())
    config = json.loads((blobs / manifest["config"]["digest"][7:]).read_text())
    assert config["config"]["Entrypoint"] == [f"/usr/local/bin/{PLUGIN}"]
    with tarfile.open(blobs / manifest["layers"][0]["digest"][7:]) as layer:
        member = layer.extractfile(f"usr/local/bin/{PLUGIN}")
        assert member is not None and member.read() == data
    # what its go.mod requires, pinned by go.sum's hashes
    sums = bundle.manifest["module_sums"]
    assert sums["k8s.io/kubelet@v0.36.3"].startswith("h1:")
    assert any(m.startswith("google.golang.org/grpc@") for m in sums)


def test_the_binary_is_static(bundle: Bundle) -> None:
    result = subprocess.run(
        ["file", "-b", str(bundle.binary(PLUGIN))], capture_output=True, text=True, check=True
    )
    assert "statically linked" in result.stdout


def stand_ins(root: Path, gpus: int, accels: int) -> None:
    """The lab's stand-in device nodes (cluster_plan/lab/hardware.py), as plain files."""
    (root / "dev" / "accel").mkdir(parents=True)
    for i in range(gpus):
        (root / "dev" / f"nvidia{i}").touch()
    (root / "dev" / "nvidiactl").touch()
    for i in range(accels):
        (root / "dev" / "accel" / f"accel{i}").touch()


@pytest.mark.parametrize(
    ("sharing", "replicas"),
    [({"mode": "time-slicing", "replicas": 4}, 4), ({"mode": "none"}, 1)],
)
def test_the_binary_serves_what_the_rendered_configuration_says(
    bundle: Bundle, tmp_path: Path, sharing: dict[str, Any], replicas: int
) -> None:
    def edit(plan: dict[str, Any]) -> None:
        plan["scheduler"]["kubernetes"]["gpu_sharing"] = sharing

    objects = render(lab_plan_as_kubernetes(edit)).all_objects()
    (config_map,) = [
        o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == PLUGIN
    ]
    stand_ins(tmp_path / "host", gpus=2, accels=3)
    lines = []
    for name, text in sorted(config_map["data"].items()):
        path = tmp_path / name
        path.write_text(text)
        host = f"--host-root={tmp_path / 'host'}"
        result = subprocess.run(
            [str(bundle.binary(PLUGIN)), f"--config={path}", host, "--check"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert result.returncode == 0, result.stderr
        lines += result.stdout.splitlines()
    assert lines == [
        "cluster-plan.io/tpu: 3 devices x 1 replicas = 3 from /dev/accel/accel* "
        "[/dev/accel/accel0 /dev/accel/accel1 /dev/accel/accel2] env TPU_VISIBLE_DEVICES",
        f"nvidia.com/gpu: 2 devices x {replicas} replicas = {2 * replicas} from "
        "/dev/nvidia[0-9]* [/dev/nvidia0 /dev/nvidia1] env NVIDIA_VISIBLE_DEVICES",
    ]


def test_the_binary_refuses_a_bad_configuration_with_its_file(
    bundle: Bundle, tmp_path: Path
) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"resources": [{"name": "gpu", "devices": "/dev/nvidia*", "env": "X"}]}')
    result = subprocess.run(
        [str(bundle.binary(PLUGIN)), f"--config={path}", "--check"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert str(path) in result.stderr and '"gpu" is not an extended resource' in result.stderr
