"""The Kubernetes 1.36 bundle this machine built, read from the real cache ($CLUSTER_PLAN_CACHE
or /var/cache/cluster-plan): every artifact against its manifest, and the binaries asked
what they are. Skipped until `cluster-plan k8s bundle inventory/lab/k8s.yml` has built it;
this module never builds it (a cold build takes many minutes)."""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from cluster_plan.kubernetes.bundle import built_bundle
from cluster_plan.kubernetes.bundle.builder import Bundle, verify
from cluster_plan.kubernetes.bundle.oci import layout_problems

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = built_bundle("1.36")
pytestmark = pytest.mark.skipif(
    BUNDLE is None,
    reason="the Kubernetes 1.36 bundle is not built on this machine: "
    "cluster-plan k8s bundle inventory/lab/k8s.yml",
)


@pytest.fixture(scope="module")
def bundle() -> Bundle:
    assert BUNDLE is not None
    return BUNDLE


def ask(bundle: Bundle, binary: str, *args: str) -> str:
    result = subprocess.run(
        [str(bundle.binary(binary)), *args], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result.stdout + result.stderr


def test_every_artifact_has_its_manifests_digest(bundle: Bundle) -> None:
    assert verify(bundle) == []
    schema = json.loads((ROOT / "schemas" / "k8s-bundle-manifest.schema.json").read_text())
    assert list(Draft202012Validator(schema).iter_errors(bundle.manifest)) == []
    assert bundle.manifest["built"] and bundle.manifest["kubernetes"] == "1.36.3"
    kinds = [a["kind"] for a in bundle.manifest["artifacts"]]
    assert (kinds.count("binary"), kinds.count("image")) == (21, 7)


def test_kubeadm_is_the_release_it_says(bundle: Bundle) -> None:
    version = json.loads(ask(bundle, "kubeadm", "version", "-o", "json"))["clientVersion"]
    assert version["gitVersion"] == "v1.36.3"
    assert (version["major"], version["minor"]) == ("1", "36")
    assert version["gitTreeState"] == "archive"
    assert version["buildDate"].startswith("2026-")  # the release's commit time, not today


def test_the_binaries_report_their_versions(bundle: Bundle) -> None:
    assert ask(bundle, "kubelet", "--version").strip() == "Kubernetes v1.36.3"
    assert ask(bundle, "kubectl", "version", "--client", "-o", "json").count("v1.36.3") >= 1
    assert "etcd Version: 3.6.8" in ask(bundle, "etcd", "--version")
    assert "etcdctl version: 3.6.8" in ask(bundle, "etcdctl", "version")
    assert "containerd github.com/containerd/containerd/v2 v2.4.2" in ask(
        bundle, "containerd", "--version"
    )
    runc = ask(bundle, "runc", "--version").splitlines()
    assert runc[0] == "runc version 1.5.3"
    assert any(line.startswith("libseccomp: 2.") for line in runc)
    assert "CoreDNS-1.14.2" in ask(bundle, "coredns", "-version")
    assert "v1.10.0" in ask(bundle, "ptp", "--version")
    assert "v3.10.2" in ask(bundle, "pause", "-v")


def test_what_runs_on_any_node_is_static(bundle: Bundle) -> None:
    for name in ("runc", "pause", "containerd", "kubelet", "etcd", "ptp"):
        head = bundle.binary(name).read_bytes()[:8192]
        assert b"ld-linux" not in head, f"{name} is dynamically linked"


def test_kubeadm_lists_exactly_the_bundles_images(bundle: Bundle) -> None:
    images = [a for a in bundle.manifest["artifacts"] if a["kind"] == "image"]
    listed = ask(bundle, "kubeadm", "config", "images", "list", "--kubernetes-version=v1.36.3")
    assert listed.split() == [a["reference"] for a in images]
    repository = "mirror.lab:5000/k8s"
    listed = ask(
        bundle,
        "kubeadm",
        "config",
        "images",
        "list",
        "--kubernetes-version=v1.36.3",
        f"--image-repository={repository}",
    )
    assert listed.split() == [f"{repository}/{a['mirror_path']}" for a in images]


def _config(layout: Path) -> dict[str, object]:
    index = json.loads((layout / "index.json").read_text())
    blobs = layout / "blobs" / "sha256"
    manifest = json.loads((blobs / index["manifests"][0]["digest"][7:]).read_text())
    config = json.loads((blobs / manifest["config"]["digest"][7:]).read_text())
    assert isinstance(config, dict)
    return config


def test_the_images_are_valid_and_start_what_kubeadm_starts(bundle: Bundle) -> None:
    for artifact in bundle.manifest["artifacts"]:
        if artifact["kind"] == "image":
            assert layout_problems(bundle.image_layout(artifact["name"])) == []
    coredns = _config(bundle.image_layout("coredns"))["config"]
    assert coredns == {"Entrypoint": ["/coredns"], "Env": [_path()]}
    pause = _config(bundle.image_layout("pause"))["config"]
    assert pause == {"Entrypoint": ["/pause"], "Env": [_path()], "User": "65535:65535"}


def _path() -> str:
    return "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@pytest.mark.skipif(os.geteuid() != 0, reason="chroot needs root")
def test_kube_proxys_netfilter_tools_run_from_the_image_alone(
    bundle: Bundle, tmp_path: Path
) -> None:
    """The image's nft and iptables start with the image's own loader and libraries."""
    layout = bundle.image_layout("kube-proxy")
    index = json.loads((layout / "index.json").read_text())
    blobs = layout / "blobs" / "sha256"
    manifest = json.loads((blobs / index["manifests"][0]["digest"][7:]).read_text())
    with tarfile.open(blobs / manifest["layers"][0]["digest"][7:]) as layer:
        if hasattr(tarfile, "tar_filter"):  # the filter came with 3.11.4; 3.14 wants one
            layer.extractall(tmp_path, filter="tar")
        else:
            layer.extractall(tmp_path)
    for command, answer in (
        (["/usr/sbin/nft", "--version"], "nftables v"),
        (["/usr/sbin/iptables", "--version"], "(nf_tables)"),
        (["/usr/sbin/ip6tables-restore", "--version"], "(nf_tables)"),
        (["/usr/local/bin/kube-proxy", "--version"], "Kubernetes v1.36.3"),
    ):
        result = subprocess.run(
            ["chroot", str(tmp_path), *command], capture_output=True, text=True, timeout=30
        )
        assert result.returncode == 0, result.stderr
        assert answer in result.stdout
