"""The wrapper go.mod a component is built from: the upstream module's in-repository
replaces turned into published versions (Kubernetes' 33 staging modules at v0.36.3 for
v1.36.3, etcd's sibling modules at their required versions), its go and godebug lines kept."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from cluster_plan.kubernetes.bundle.artifacts import bundle_spec
from cluster_plan.kubernetes.bundle.gobuild import default_name, ldflags
from cluster_plan.kubernetes.bundle.gomodule import (
    ModuleError,
    UpstreamModule,
    replaces,
    staging_version,
    upstream_module,
    wrapper_go,
    wrapper_gomod,
)

FIXTURES = Path(__file__).with_name("bundle_fixtures")


def _recorded(name: str, path: str, version: str) -> UpstreamModule:
    return upstream_module(path, version, json.loads((FIXTURES / name).read_text()))


def kubernetes() -> UpstreamModule:
    return _recorded("k8s.io_kubernetes_v1.36.3.gomod.json", "k8s.io/kubernetes", "v1.36.3")


def etcdutl() -> UpstreamModule:
    return _recorded(
        "go.etcd.io_etcd_etcdutl_v3_v3.6.8.gomod.json", "go.etcd.io/etcd/etcdutl/v3", "v3.6.8"
    )


def test_every_staging_module_is_replaced_at_the_releases_v0_version() -> None:
    chosen = replaces([kubernetes()])
    assert len(chosen) == 33
    assert set(chosen.values()) == {"v0.36.3"}
    assert {"k8s.io/api", "k8s.io/client-go", "k8s.io/kubelet", "k8s.io/cri-api"} <= set(chosen)
    assert "github.com/google/cel-go" not in chosen  # required, but not replaced upstream


def test_etcds_siblings_keep_their_versions_and_its_guards_are_dropped() -> None:
    chosen = replaces([etcdutl()])
    assert chosen == {
        "go.etcd.io/etcd/api/v3": "v3.6.8",
        "go.etcd.io/etcd/client/pkg/v3": "v3.6.8",
        "go.etcd.io/etcd/client/v3": "v3.6.8",
        "go.etcd.io/etcd/pkg/v3": "v3.6.8",
        "go.etcd.io/etcd/server/v3": "v3.6.8",
    }


def test_two_modules_replacing_one_path_at_different_versions_is_an_error() -> None:
    older = UpstreamModule("a/x", "v1.0.0", "1.24", (), {"a/lib": "v1.0.0"}, ("a/lib",))
    newer = UpstreamModule("a/y", "v1.1.0", "1.25", (), {"a/lib": "v1.1.0"}, ("a/lib",))
    with pytest.raises(ModuleError, match=r"a/lib is replaced at v1\.0\.0 and at v1\.1\.0"):
        replaces([older, newer])
    assert wrapper_go([older, newer]) == "1.25"


def test_staging_versions_come_only_from_a_release() -> None:
    assert staging_version("v1.37.2") == "v0.37.2"
    with pytest.raises(ModuleError):
        staging_version("v1.36.3-rc.0")


def test_the_kubernetes_wrapper_module() -> None:
    tools = [f"k8s.io/kubernetes/cmd/{c}" for c in ("kubeadm", "kubelet")]
    text = wrapper_gomod("kubernetes", [kubernetes()], tools)
    lines = [line.strip() for line in text.splitlines()]
    assert "module cluster-plan.local/bundle/kubernetes" in lines
    assert "go 1.26.0" in lines
    assert "default=go1.26" in lines  # the binaries' GODEBUG defaults, as upstream's
    assert "k8s.io/kubernetes v1.36.3" in lines
    assert "k8s.io/api => k8s.io/api v0.36.3" in lines
    assert sum(" => " in line for line in lines) == 33
    assert "k8s.io/kubernetes/cmd/kubeadm" in lines
    assert "$" not in text  # every template field filled


@pytest.mark.skipif(shutil.which("go") is None, reason="needs go")
def test_go_reads_the_wrapper_module_back(tmp_path: Path) -> None:
    modules = [etcdutl(), _recorded_etcd_server()]
    (tmp_path / "go.mod").write_text(wrapper_gomod("etcd", modules, ["go.etcd.io/etcd/etcdutl/v3"]))
    result = subprocess.run(
        ["go", "mod", "edit", "-json", str(tmp_path / "go.mod")],
        capture_output=True,
        text=True,
        check=True,
    )
    parsed = json.loads(result.stdout)
    assert {r["Path"] for r in parsed["Require"]} == {
        "go.etcd.io/etcd/etcdutl/v3",
        "go.etcd.io/etcd/server/v3",
    }
    assert {(r["Old"]["Path"], r["New"]["Version"]) for r in parsed["Replace"]} >= {
        ("go.etcd.io/etcd/api/v3", "v3.6.8")
    }
    assert parsed["Tool"] == [{"Path": "go.etcd.io/etcd/etcdutl/v3"}]
    assert parsed["Go"] == "1.24.0"


def _recorded_etcd_server() -> UpstreamModule:
    # server/v3 replaces the same siblings as etcdutl at the same versions
    util = etcdutl()
    return UpstreamModule(
        "go.etcd.io/etcd/server/v3",
        "v3.6.8",
        "1.24.0",
        (),
        {k: v for k, v in util.requires.items() if k != "go.etcd.io/etcd/server/v3"},
        tuple(p for p in util.local_replaces if p != "go.etcd.io/etcd/server/v3"),
    )


def test_binaries_get_gos_default_names_and_fixed_version_flags() -> None:
    assert default_name("go.etcd.io/etcd/server/v3") == "server"
    assert default_name("k8s.io/kubernetes/cmd/kubeadm") == "kubeadm"
    assert default_name("github.com/opencontainers/runc") == "runc"
    spec = bundle_spec("1.36")
    kubernetes_build = next(b for b in spec.go_builds if b.component == "kubernetes")
    flags = ldflags(kubernetes_build, "2026-07-22T18:07:38Z")
    assert flags.startswith("-s -w -buildid= ")
    assert "-X k8s.io/component-base/version.buildDate=2026-07-22T18:07:38Z" in flags
    assert "{source_date}" not in flags
    runc = next(b for b in spec.go_builds if b.component == "runc")
    assert ldflags(runc, "x").endswith("-extldflags=-static")
