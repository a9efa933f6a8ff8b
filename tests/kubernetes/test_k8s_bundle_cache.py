"""The bundle cache: where it is, what its key covers, the environment every go command
gets, and the copy `-o` makes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cluster_plan.cli.policy import UsageError
from cluster_plan.kubernetes.bundle import cache
from cluster_plan.kubernetes.bundle.artifacts import bundle_spec
from cluster_plan.kubernetes.bundle.command import _copy
from cluster_plan.kubernetes.versions import BUNDLE_RELEASES

TOOLCHAIN = cache.Toolchain(
    go="go1.26.8",
    goos="linux",
    goarch="amd64",
    gcc="12.2.0",
    packages={"gcc": "4:12.2.0-3", "libc6-dev": "2.36-9+deb12u14", "libseccomp-dev": "2.5.4-1"},
)
PACKAGES = {"kube-proxy:nftables": "1.0.6-2+deb12u2", "kube-proxy:libc6": "2.36-9+deb12u14"}


def key(**changes: object) -> str:
    spec = bundle_spec("1.36")
    recipe = spec.recipe()
    toolchain = dataclasses.replace(TOOLCHAIN, **changes)  # type: ignore[arg-type]
    return cache.bundle_key(recipe, toolchain, PACKAGES)


def test_the_key_is_stable_and_short() -> None:
    assert key() == key()
    assert len(key()) == 16 and int(key(), 16) >= 0
    spec = bundle_spec("1.36.3")
    assert cache.bundle_key(spec.recipe(), TOOLCHAIN, PACKAGES) == key()


def test_the_key_changes_with_go_gcc_packages_and_every_pin() -> None:
    base = key()
    assert key(go="go1.26.9") != base
    assert key(gcc="12.3.0") != base
    assert key(packages={**TOOLCHAIN.packages, "libseccomp-dev": "2.5.5-1"}) != base
    moved = {**PACKAGES, "kube-proxy:nftables": "1.0.6-2+deb12u3"}
    assert cache.bundle_key(bundle_spec("1.36").recipe(), TOOLCHAIN, moved) != base
    other = bundle_spec("1.36")
    changed_release = dataclasses.replace(BUNDLE_RELEASES["1.36"], coredns="v1.14.3")
    changed = dataclasses.replace(other, release=changed_release)
    assert cache.bundle_key(changed.recipe(), TOOLCHAIN, PACKAGES) != base


def test_the_cache_is_the_option_else_the_environment_else_var_cache() -> None:
    assert cache.cache_root(Path("/x"), {"CLUSTER_PLAN_CACHE": "/y"}) == Path("/x")
    assert cache.cache_root(None, {"CLUSTER_PLAN_CACHE": "/y"}) == Path("/y")
    assert cache.cache_root(None, {}) == Path("/var/cache/cluster-plan")
    assert cache.entry_name("1.36.3", "0123456789abcdef") == "1.36.3-0123456789abcdef"


def test_go_gets_the_caches_own_module_and_build_caches_and_the_sites_proxy() -> None:
    env = cache.go_environment(
        Path("/c"),
        {
            "PATH": "/usr/bin",
            "GOPROXY": "https://proxy.site",
            "GOFLAGS": "-mod=vendor",
            "GOCACHE": "/elsewhere",
            "CGO_CFLAGS": "-O3",
            "GOROOT": "/opt/go",
        },
    )
    assert env["GOMODCACHE"] == "/c/go/mod" and env["GOCACHE"] == "/c/go/build"
    assert env["GOPROXY"] == "https://proxy.site" and env["GOROOT"] == "/opt/go"
    assert env["GOFLAGS"] == "-buildvcs=false -modcacherw"  # not the user's -mod=vendor
    assert "CGO_CFLAGS" not in env
    assert (env["GOTOOLCHAIN"], env["GOWORK"], env["PATH"]) == ("local", "off", "/usr/bin")


def test_a_bundle_counts_once_its_manifest_is_there(tmp_path: Path) -> None:
    assert not cache.is_complete(tmp_path)
    (tmp_path / cache.MANIFEST).write_text("{}")
    assert cache.is_complete(tmp_path)


def test_the_copy_goes_to_a_new_or_empty_directory_only(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    (bundle / "bin").mkdir(parents=True)
    (bundle / "bin" / "kubeadm").write_bytes(b"kubeadm")
    notes: list[str] = []
    _copy(bundle, tmp_path / "out", notes.append)
    assert (tmp_path / "out" / "bin" / "kubeadm").read_bytes() == b"kubeadm"
    assert notes == [f"copied {bundle} to {tmp_path / 'out'}"]
    with pytest.raises(UsageError, match="not empty"):
        _copy(bundle, tmp_path / "out", notes.append)
