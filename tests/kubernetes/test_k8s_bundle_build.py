"""The builder end to end on a tiny bundle: one Go program and one C program from a module a
local file proxy serves (GOPROXY=file://, no network), and an image of the Go program.

What must hold: a build lands complete or not at all; two builds give the same bytes; a
complete bundle is only verified, never rebuilt; a second build of the same key waits for
the first; a module the proxy does not have is named; a broken build leaves nothing that
counts as built."""

from __future__ import annotations

import json
import shutil
import threading
import zipfile
from pathlib import Path

import pytest

from cluster_plan.kubernetes.bundle import builder, cache
from cluster_plan.kubernetes.bundle.artifacts import (
    BundleSpec,
    CBuild,
    GoBuild,
    Image,
    binaries_of,
)
from cluster_plan.kubernetes.versions import BUNDLE_RELEASES

pytestmark = pytest.mark.skipif(
    shutil.which("go") is None or shutil.which("gcc") is None, reason="needs go and gcc"
)

MODULE = "example.test/hello"
VERSION = "v1.0.0"
FILES = {
    "go.mod": f"module {MODULE}\n\ngo 1.22\n",
    "cmd/hello/main.go": "package main\n\nvar version string\n\nfunc main() { println(version) }\n",
    "c/tiny.c": "int main(void) { return 0; }\n",
}


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A GOPROXY=file:// tree serving example.test/hello v1.0.0."""
    root = tmp_path_factory.mktemp("proxy")
    versions = root / MODULE / "@v"
    versions.mkdir(parents=True)
    (versions / "list").write_text(f"{VERSION}\n")
    (versions / f"{VERSION}.info").write_text(
        json.dumps({"Version": VERSION, "Time": "2026-01-02T03:04:05Z"})
    )
    (versions / f"{VERSION}.mod").write_text(FILES["go.mod"])
    with zipfile.ZipFile(versions / f"{VERSION}.zip", "w") as archive:
        for name, text in FILES.items():
            archive.writestr(f"{MODULE}@{VERSION}/{name}", text)
    return root


@pytest.fixture(scope="module")
def gocache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One GOCACHE for the module's builds: the runtime is compiled once."""
    return tmp_path_factory.mktemp("gocache")


@pytest.fixture
def root(tmp_path: Path, gocache: Path, proxy: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GOPROXY", f"file://{proxy}")
    monkeypatch.setenv("GOSUMDB", "off")
    (tmp_path / "cache" / "go").mkdir(parents=True)
    (tmp_path / "cache" / "go" / "build").symlink_to(gocache)
    return tmp_path / "cache"


def tiny_spec(version: str = VERSION, package: str = f"{MODULE}/cmd/hello") -> BundleSpec:
    go_builds = (
        GoBuild(
            "hello",
            ((MODULE, version),),
            ((package, "hello"),),
            ldflags=("-X main.version={source_date}",),
        ),
    )
    c_builds = (CBuild("tiny", "1.0", (MODULE, version), "c/tiny.c", "tiny", ("-Os", "-s")),)
    images = (
        Image("hello", "hello", "v1", version, (("usr/local/bin/hello", "hello"),), ("/hello",)),
    )
    return BundleSpec(
        plan_version="1.36",
        release=BUNDLE_RELEASES["1.36"],
        go_builds=go_builds,
        c_builds=c_builds,
        images=images,
        binaries=binaries_of(go_builds, c_builds),
    )


def build(root: Path, spec: BundleSpec | None = None) -> tuple[builder.Bundle, list[str]]:
    notes: list[str] = []
    bundle = builder.ensure(builder.prepare(spec or tiny_spec(), root), notes.append)
    return bundle, notes


def test_a_build_is_complete_verified_and_holds_its_sources(root: Path) -> None:
    bundle, notes = build(root)
    directory = bundle.directory
    assert directory.parent == root / "k8s"
    assert directory.name.startswith("1.36.3-")
    assert cache.is_complete(directory)
    assert not list((root / "k8s").glob(".partial-*"))
    assert builder.verify(bundle) == []
    assert [a["name"] for a in bundle.manifest["artifacts"]] == ["hello", "tiny", "hello"]
    assert bundle.binary("hello").read_bytes().startswith(b"\x7fELF")
    assert (bundle.image_layout("hello") / "index.json").is_file()
    assert bundle.manifest["module_sums"][f"{MODULE}@{VERSION}"].startswith("h1:")
    gomod = (directory / "sources" / "hello" / "go.mod").read_text()
    assert f"{MODULE} {VERSION}" in gomod and f"tool {MODULE}/cmd/hello" in gomod
    assert (directory / "sources" / "hello" / "go.sum").is_file()
    steps = json.loads((directory / "build.json").read_text())["steps"]
    assert {"hello-tidy", "hello-build", "tiny-build"} <= {s["step"] for s in steps}
    assert all(s["max_rss_mib"] > 0 for s in steps if s["step"] == "hello-build")
    assert any(note.startswith("built ") for note in notes)


def test_a_complete_bundle_is_verified_not_rebuilt(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, _ = build(root)

    def no_build(*_args: object) -> builder.Bundle:
        raise AssertionError("a complete bundle was built again")

    monkeypatch.setattr(builder, "_build", no_build)
    again, notes = build(root)
    assert again == first and notes == []
    first.binary("hello").write_bytes(b"changed")
    with pytest.raises(builder.BundleError, match="is damaged") as damaged:
        build(root)
    assert "bin/hello does not have the manifest's sha256" in str(damaged.value)


def test_two_builds_give_the_same_bytes(root: Path, tmp_path: Path, gocache: Path) -> None:
    other = tmp_path / "other"
    (other / "go").mkdir(parents=True)
    (other / "go" / "build").symlink_to(gocache)
    one, _ = build(root)
    two, _ = build(other)
    assert one.directory.name == two.directory.name  # the same key
    assert (one.directory / "manifest.json").read_bytes() == (
        two.directory / "manifest.json"
    ).read_bytes()
    layout = Path("images") / "hello"
    for name in ("index.json", "oci-layout"):
        assert (one.directory / layout / name).read_bytes() == (
            two.directory / layout / name
        ).read_bytes()


def test_a_second_build_of_the_key_waits_for_the_first(root: Path) -> None:
    prepared = builder.prepare(tiny_spec(), root)
    lock = prepared.entry.with_name(prepared.entry.name + ".lock")
    notes: list[str] = []
    results: list[builder.Bundle] = []
    with cache.locked(lock, notes.append):
        waiter = threading.Thread(
            target=lambda: results.append(builder.ensure(prepared, notes.append))
        )
        waiter.start()
        waiter.join(timeout=1.5)
        assert waiter.is_alive() and not results  # it waits for the lock
        assert any(n.startswith("waiting for pid ") for n in notes)
    waiter.join(timeout=120)
    assert results and cache.is_complete(results[0].directory)


def test_a_module_the_proxy_does_not_serve_is_named(root: Path) -> None:
    with pytest.raises(builder.BundleError) as unserved:
        build(root, tiny_spec(version="v9.9.9"))
    assert unserved.value.usage
    assert f"{MODULE}@v9.9.9 is not served by the Go module proxy" in str(unserved.value)


def test_a_broken_build_leaves_nothing_that_counts_as_built(root: Path) -> None:
    spec = tiny_spec(package=f"{MODULE}/cmd/nope")
    with pytest.raises(builder.BundleError) as broken:
        build(root, spec)
    assert not broken.value.usage
    assert "hello-tidy" in str(broken.value) and "log:" in str(broken.value)
    prepared = builder.prepare(spec, root)
    assert not prepared.entry.exists()
    partial = prepared.entry.with_name(f".partial-{prepared.entry.name}")
    assert partial.is_dir() and not cache.is_complete(partial)
    (partial / cache.MANIFEST).write_text("{}")  # even a manifest in a partial one
    assert builder.find(prepared) is None
