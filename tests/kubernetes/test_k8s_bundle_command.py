"""`cluster-plan k8s bundle`: the manifest without building (--list), its JSON against the
published schema, and every way it refuses: a plan that is no Kubernetes cluster, a version
the bundle does not pin, no Go, no gcc, a module not served, an unreadable plan. Nothing
here builds the bundle (test_k8s_bundle_build.py builds a tiny one)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from support.cli_output import envelope

from cluster_plan.cli import main

ROOT = Path(__file__).resolve().parents[2]
K8S_LAB = ROOT / "inventory" / "lab" / "k8s.yml"
SLURM_LAB = ROOT / "inventory" / "lab" / "cluster.yml"
SCHEMA = json.loads((ROOT / "schemas" / "k8s-bundle-manifest.schema.json").read_text())
MANIFEST = Draft202012Validator(SCHEMA)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["k8s", "bundle", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def manifest_problems(document: object) -> list[str]:
    return [f"{e.json_path}: {e.message}" for e in MANIFEST.iter_errors(document)]


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def plan_with_version(tmp_path: Path, version: str) -> Path:
    text = K8S_LAB.read_text().replace('version: "1.36"', f'version: "{version}"')
    assert f'version: "{version}"' in text
    plan = tmp_path / "k8s.yml"
    plan.write_text(text)
    shutil.copy(K8S_LAB.with_name("k8s.lock.json"), tmp_path / "k8s.lock.json")
    return plan


def test_list_prints_every_artifact_without_building(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run([str(K8S_LAB), "--list", "--cache", str(cache)], capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"Kubernetes 1.36.3 offline bundle for {K8S_LAB} (version '1.36')"
    # the release's 21 binaries and 7 images, the project's device plugin (the lab plan's
    # accelerators are served by it) and its training image (the plan's training class runs
    # Debian's torch, and the plan names no image of its own)
    assert sum(line.startswith("binary ") for line in lines) == 22
    assert sum(line.startswith("image ") for line in lines) == 9
    training = "image   cluster-plan.local/cluster-plan-training:"
    assert any(line.startswith(training) for line in lines)
    assert any(line.startswith("binary  cluster-plan-device-plugin ") for line in lines)
    assert any("registry.k8s.io/etcd:3.6.8-0" in line for line in lines)
    assert "  not built yet" in lines
    assert not (cache / "k8s").exists()  # nothing built, nothing written


def test_list_as_json_is_one_envelope_and_a_valid_manifest(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [str(K8S_LAB), "--list", "--cache", str(cache), "--format", "json"]
    code, out, _ = run([*argv, "--image-repository", "mirror.lab:5000/k8s"], capsys)
    assert code == 0
    document = envelope(out)
    assert (document["command"], document["status"]) == ("k8s bundle", "ok")
    result = document["result"]
    assert manifest_problems(result) == []
    assert result["built"] is False and result["directory"] is None
    assert result["key"] and result["toolchain"]["go"].startswith("go1.")
    kinds = [a["kind"] for a in result["artifacts"]]
    assert kinds.count("binary") == 22 and kinds.count("image") == 9
    assert all(a["sha256"] is None for a in result["artifacts"])
    coredns = next(
        a for a in result["artifacts"] if a["name"] == "coredns" and a["kind"] == "image"
    )
    assert coredns["reference"] == "registry.k8s.io/coredns/coredns:v1.14.2"
    assert coredns["mirror_reference"] == "mirror.lab:5000/k8s/coredns:v1.14.2"
    proxy = next(
        a for a in result["artifacts"] if a["name"] == "kube-proxy" and a["kind"] == "image"
    )
    assert proxy["sources"][0] == "k8s.io/kubernetes@v1.36.3"
    assert any(s.startswith("nftables=") for s in proxy["sources"])
    assert any(s.startswith("libc6=") for s in proxy["sources"])
    plugin = next(
        a
        for a in result["artifacts"]
        if a["name"] == "cluster-plan-device-plugin" and a["kind"] == "image"
    )
    assert plugin["reference"].startswith("cluster-plan.local/cluster-plan-device-plugin:v0.1.0-")
    assert plugin["sources"] == [f"cluster-plan.local/device-plugin@{plugin['version']}"]
    # the DaemonSets name the image the bundle builds: it is not among those it lacks
    missing = {n["reference"] for n in result["not_included"]}
    assert plugin["reference"] not in missing
    assert not any("device-plugin" in m for m in missing)
    # the lab plan's pod network is the bundle's own plugins (cni: host-routes), not Calico
    assert not any("Calico" in reference for reference in missing)


def test_the_schema_refuses_a_broken_manifest() -> None:
    artifact = {
        "name": "kubeadm",
        "kind": "binary",
        "version": "v1.36.3",
        "sources": ["k8s.io/kubernetes@v1.36.3"],
        "path": "bin/kubeadm",
        "sha256": "0" * 64,
        "size": 1,
    }
    good = {
        "schema_version": 1,
        "kubernetes": "1.36.3",
        "key": "0123456789abcdef",
        "built": True,
        "toolchain": None,
        "artifacts": [artifact],
        "module_sums": {},
    }
    assert manifest_problems(good) == []
    assert manifest_problems({**good, "artifacts": [{**artifact, "sha256": "abc"}]})
    assert manifest_problems({**good, "artifacts": [{**artifact, "sources": ["kubernetes"]}]})
    image_without_reference = {**artifact, "kind": "image"}
    assert manifest_problems({**good, "artifacts": [image_without_reference]})
    assert manifest_problems({**good, "artifacts": [{**artifact, "reference": "x"}]})
    assert manifest_problems({**good, "extra": 1})


def test_a_slurm_plan_is_refused_with_its_findings(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run([str(SLURM_LAB), "--list", "--cache", str(cache)], capsys)
    assert code == 1 and out == ""
    assert "scheduler" in err


def test_a_version_the_bundle_does_not_pin_is_a_finding_at_its_line(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = plan_with_version(tmp_path, "1.35")
    code, out, err = run([str(plan), "--list", "--cache", str(cache)], capsys)
    assert code == 1 and out == ""
    line = next(i for i, t in enumerate(plan.read_text().splitlines(), 1) if '"1.35"' in t)
    assert f"{plan}:{line}:" in err
    assert "$.scheduler.kubernetes.version" in err
    assert "the offline bundle has no Kubernetes 1.35" in err


def test_without_go_the_build_stops_and_the_list_has_no_key(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    code, out, err = run([str(K8S_LAB), "--cache", str(cache)], capsys)
    assert (code, out) == (2, "")
    assert "cluster-plan k8s: error: go is not installed" in err
    assert "Traceback" not in err
    code, out, err = run(
        [str(K8S_LAB), "--list", "--cache", str(cache), "--format", "json"], capsys
    )
    assert code == 0
    result = envelope(out)["result"]
    assert result["key"] is None and result["toolchain"] is None
    assert manifest_problems(result) == []
    assert "no key, no digests: go is not installed" in err


@pytest.mark.skipif(shutil.which("go") is None, reason="needs go")
def test_without_gcc_the_build_stops(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    only_go = tmp_path / "bin"
    only_go.mkdir()
    (only_go / "go").symlink_to(os.path.realpath(str(shutil.which("go"))))
    monkeypatch.setenv("PATH", str(only_go))
    code, _, err = run([str(K8S_LAB), "--cache", str(cache), "--format", "json"], capsys)
    assert code == 2
    assert "gcc is not installed" in err


@pytest.mark.skipif(
    shutil.which("go") is None or shutil.which("gcc") is None, reason="needs go and gcc"
)
def test_a_module_not_served_is_named(
    cache: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOPROXY", "off")  # an empty module cache and no proxy
    code, out, err = run([str(K8S_LAB), "--cache", str(cache), "--format", "json"], capsys)
    assert code == 2
    document = envelope(out)
    assert document["status"] == "error"
    assert (
        "k8s.io/kubernetes@v1.36.3 is not served by the Go module proxy"
        in (document["error"]["message"])
    )
    assert "Traceback" not in err
    built = [p for p in (cache / "k8s").glob("1.36.3-*") if p.is_dir()]
    assert built == []  # a partial directory, a lock: nothing that counts as built


def test_an_unreadable_plan_and_an_unbuilt_copy_are_usage_errors(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run([str(tmp_path / "none.yml"), "--list"], capsys)
    assert code == 2 and "none.yml" in err
    code, _, err = run(
        [str(K8S_LAB), "--list", "--cache", str(cache), "-o", str(tmp_path / "out")], capsys
    )
    assert code == 2
    assert "-o copies a built bundle" in err


def test_the_roles_lookup_finds_the_bundle_the_plan_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The containerd and kubernetes roles read the bundle the k8s_mirror role built for the
    plan (its device plugin and training image included), not the release's alone, which a
    machine that built only the plan's never has."""
    import collection_loader  # noqa: F401  (the collection's plugins by their FQCN)
    from ansible.parsing.dataloader import DataLoader
    from ansible.plugins.loader import lookup_loader
    from ansible.template import Templar

    from cluster_plan.api import load_expanded
    from cluster_plan.kubernetes import bundle
    from cluster_plan.kubernetes.bundle.command import plan_needs
    from cluster_plan.kubernetes.cluster import kubernetes_plan

    asked: list[object] = []

    def built(version: str, cache: Path | None = None, needs: object = None) -> None:
        asked.append(needs)

    monkeypatch.setattr(bundle, "built_bundle", built)
    loader = DataLoader()
    lookup = lookup_loader.get(
        "cluster_plan.cluster.k8s_bundle", loader=loader, templar=Templar(loader)
    )
    expanded = load_expanded(str(K8S_LAB))
    with pytest.raises(Exception, match=r"no offline bundle for Kubernetes 1\.36"):
        lookup.run(["1.36"], {}, plan_file=str(K8S_LAB))
    wanted = plan_needs(kubernetes_plan(expanded))
    assert wanted.device_plugin and asked == [wanted]
