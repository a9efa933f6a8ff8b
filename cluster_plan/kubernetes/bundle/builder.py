"""Build a bundle into the cache, or find it there: the shell around artifacts.py.

A bundle directory (cache.py says where):

    manifest.json, manifest.txt     what is in it (manifest.py)
    build.json                      how long each step took, its CPU time and peak memory
    bin/<binary>                    Kubernetes, etcd, containerd, runc, CoreDNS, pause (and
                                    for a plan that needs it, the project's device plugin)
    cni/bin/<plugin>                the CNI plugins, as /opt/cni/bin on a node
    images/<image>/                 one OCI image layout per image kubeadm pulls, and the
                                    project's images a plan needs (device plugin, training)
    sources/<component>/go.mod, go.sum   the module each component was built from
    logs/<step>.log                 every command's output

The build runs in a partial directory under the lock and is renamed into place when
complete, manifest written last: a killed build leaves nothing that counts as built.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from cluster_plan.kubernetes.bundle import cache, oci, rootfs
from cluster_plan.kubernetes.bundle.artifacts import (
    KUBERNETES_MODULE,
    PATH_ENV,
    BundleSpec,
    Image,
    kubeadm_pins,
    pin_problems,
)
from cluster_plan.kubernetes.bundle.gobuild import (
    BuildError,
    Module,
    Runner,
    build_c,
    build_go,
    build_local,
    download,
)
from cluster_plan.kubernetes.bundle.host_files import HostFilesError, HostTree, host_tree
from cluster_plan.kubernetes.bundle.manifest import manifest, text
from cluster_plan.kubernetes.bundle.project import training_program

Note = Callable[[str], None]


class BundleError(RuntimeError):
    """The bundle cannot be built or found; ``usage`` when this machine or site is the cause
    (a tool missing, a module not served), not the build."""

    def __init__(self, message: str, *, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


@dataclass(frozen=True)
class Bundle:
    """A complete bundle in the cache. The next steps ask it for paths:
    `bundle.binary("kubeadm")`, `bundle.image_layout("kube-apiserver")`."""

    directory: Path
    manifest: dict[str, Any]

    def artifact(self, name: str, kind: str) -> dict[str, Any]:
        for artifact in self.manifest["artifacts"]:
            if artifact["name"] == name and artifact["kind"] == kind:
                return dict(artifact)
        raise KeyError(f"no {kind} {name!r} in {self.directory}")

    def binary(self, name: str) -> Path:
        """The built binary (`kubeadm`, `etcd`, `containerd`, `ptp`, ...)."""
        return self.directory / self.artifact(name, "binary")["path"]

    def image_layout(self, name: str) -> Path:
        """The OCI image layout directory of an image (`kube-apiserver`, `pause`, ...)."""
        return self.directory / self.artifact(name, "image")["path"]

    @property
    def cni_bin(self) -> Path:
        return self.directory / "cni" / "bin"


@dataclass(frozen=True)
class Prepared:
    """Everything that decides the key, asked of this machine once."""

    spec: BundleSpec
    root: Path
    env: dict[str, str]
    toolchain: cache.Toolchain
    trees: dict[str, HostTree]  # image -> the files it takes from this machine
    key: str

    @property
    def entry(self) -> Path:
        return self.root / "k8s" / cache.entry_name(self.spec.kubernetes, self.key)

    @property
    def packages(self) -> dict[str, dict[str, str]]:
        return {name: dict(tree.packages) for name, tree in self.trees.items()}


def prepare(spec: BundleSpec, root: Path) -> Prepared:
    """The key for ``spec`` on this machine; BundleError(usage) when a tool is missing."""
    env = cache.go_environment(root)
    try:
        toolchain = cache.toolchain(env)
    except cache.ToolMissing as exc:
        raise BundleError(str(exc), usage=True) from None
    trees = {}
    for image in spec.images:
        if not (image.host_files or image.host_dirs):
            continue
        try:
            trees[image.name] = host_tree(image.host_files, image.host_dirs)
        except HostFilesError as exc:
            raise BundleError(
                f"the {image.name} image takes {', '.join(image.host_files)} and their "
                f"libraries from this machine's Debian packages: {exc}",
                usage=True,
            ) from None
    packages = {f"{n}:{p}": v for n, t in trees.items() for p, v in t.packages.items()}
    key = cache.bundle_key(spec.recipe(), toolchain, packages)
    return Prepared(spec, root, env, toolchain, trees, key)


def find(prepared: Prepared) -> Bundle | None:
    """The complete bundle for the key, if the cache has it (not verified)."""
    if not cache.is_complete(prepared.entry):
        return None
    document = json.loads((prepared.entry / cache.MANIFEST).read_text())
    return Bundle(prepared.entry, document)


def verify(bundle: Bundle) -> list[str]:
    """Every artifact against the manifest: binaries' sha256, images' layouts and digests."""
    problems = []
    for artifact in bundle.manifest["artifacts"]:
        path = bundle.directory / artifact["path"]
        if artifact["kind"] == "binary":
            if not path.is_file():
                problems.append(f"{path} is missing")
            elif oci.file_sha256(path) != artifact["sha256"]:
                problems.append(f"{path} does not have the manifest's sha256")
            continue
        problems += oci.layout_problems(path)
        index = (
            json.loads((path / "index.json").read_text()) if (path / "index.json").is_file() else {}
        )
        digests = [m.get("digest") for m in index.get("manifests") or []]
        if digests != [f"sha256:{artifact['sha256']}"]:
            problems.append(f"{path}: its manifest is not sha256:{artifact['sha256']}")
    return problems


def ensure(prepared: Prepared, note: Note) -> Bundle:
    """The bundle, built first when the cache has none; a cached one is verified."""
    found = find(prepared)
    if found is None:
        lock = prepared.entry.with_name(prepared.entry.name + ".lock")
        with cache.locked(lock, note):
            found = find(prepared) or _build(prepared, note)
    problems = verify(found)
    if problems:
        raise BundleError(
            f"the cached bundle {found.directory} is damaged; remove it to build it again:\n  "
            + "\n  ".join(problems[:10])
        )
    return found


def _build(prepared: Prepared, note: Note) -> Bundle:
    partial = prepared.entry.with_name(f".partial-{prepared.entry.name}")
    if partial.exists():  # a killed or failed build: we hold the lock, nobody else writes it
        shutil.rmtree(partial)
    partial.mkdir(parents=True)
    started = time.monotonic()
    runner = Runner(prepared.env, partial / "logs")
    try:
        modules = _binaries(prepared, runner, partial, note)
        local_sums = _local_binaries(prepared, runner, partial, note)
        _check_kubernetes(prepared.spec, modules, runner, partial)
        images, image_packages = _images(prepared, modules, runner, partial, note)
    except BuildError as exc:
        raise BundleError(str(exc), usage=exc.unserved) from None
    built = {b.name: _digest(partial / b.path) for b in prepared.spec.binaries} | images
    document = manifest(
        prepared.spec,
        key=prepared.key,
        toolchain=prepared.toolchain.recipe(),
        packages=prepared.packages | image_packages,
        built=built,
        module_sums={f"{m.path}@{m.version}": m.sum for m in modules.values()} | local_sums,
    )
    steps = [s.as_dict() for s in runner.steps]
    seconds = round(time.monotonic() - started, 1)
    _write_json(partial / "build.json", {"seconds": seconds, "steps": steps})
    (partial / "manifest.txt").write_text(text(document) + "\n")
    _write_json(partial / cache.MANIFEST, document)
    partial.rename(prepared.entry)
    note(f"built {prepared.entry} in {seconds:.0f} s")
    return Bundle(prepared.entry, document)


def _write_json(path: Path, document: Any) -> None:
    path.write_text(json.dumps(document, indent=2) + "\n")


def _digest(path: Path) -> dict[str, Any]:
    return {"sha256": oci.file_sha256(path), "size": path.stat().st_size}


def _binaries(
    prepared: Prepared, runner: Runner, partial: Path, note: Note
) -> dict[tuple[str, str], Module]:
    spec = prepared.spec
    modules: dict[tuple[str, str], Module] = {}

    def fetch(path: str, version: str) -> Module:
        if (path, version) not in modules:
            modules[(path, version)] = download(runner, path, version)
        return modules[(path, version)]

    for build in spec.go_builds:
        names = ", ".join(name for _, name in build.binaries)
        note(f"{build.component}: fetching {', '.join(f'{p}@{v}' for p, v in build.modules)}")
        fetched = [fetch(path, version) for path, version in build.modules]
        note(f"{build.component}: building {names}")
        component_started = time.monotonic()
        build_go(
            runner,
            build,
            fetched,
            partial / "sources" / build.component,
            partial / build.directory,
            prepared.toolchain.go,
        )
        note(f"{build.component}: done in {time.monotonic() - component_started:.0f} s")
    for c_build in spec.c_builds:
        note(f"{c_build.component}: compiling {c_build.source}")
        build_c(runner, c_build, fetch(*c_build.module), partial / c_build.directory)
    return modules


def _local_binaries(
    prepared: Prepared, runner: Runner, partial: Path, note: Note
) -> dict[str, str]:
    """The project's own programs (the device plugin); the go.sum hashes of what they pin."""
    sums: dict[str, str] = {}
    for build in prepared.spec.local_builds:
        note(f"{build.component}: building {build.binary} from the project's sources")
        sums |= build_local(
            runner, build, partial / "sources" / build.component, partial / build.directory
        )
    return sums


def _check_kubernetes(
    spec: BundleSpec, modules: Mapping[tuple[str, str], Module], runner: Runner, partial: Path
) -> None:
    """The pins against the Kubernetes sources, and the images against what the built
    kubeadm lists: a stale pin stops the build instead of shipping the wrong etcd."""
    kubernetes = modules.get((KUBERNETES_MODULE, f"v{spec.kubernetes}"))
    if kubernetes is None:  # a bundle without Kubernetes (the builder's own tests)
        return
    source = kubernetes.directory
    pins = kubeadm_pins(
        (source / "cmd/kubeadm/app/constants/constants.go").read_text(),
        (source / "build/pause/Makefile").read_text(),
    )
    problems = pin_problems(spec.release, pins)
    listed = runner.run(
        "kubeadm-images",
        [
            str(partial / spec.binary("kubeadm").path),
            "config",
            "images",
            "list",
            f"--kubernetes-version=v{spec.kubernetes}",
        ],
    ).split()
    expected = [image.reference for image in spec.images if image.kubeadm]
    if sorted(listed) != sorted(expected):
        problems.append(f"kubeadm lists {', '.join(listed)}; the bundle has {', '.join(expected)}")
    if problems:
        raise BuildError(
            "versions.BUNDLE_RELEASES differs from Kubernetes' own sources:\n  "
            + "\n  ".join(problems)
        )


def _epoch(module: Module) -> int:
    return int(datetime.fromisoformat(module.time.replace("Z", "+00:00")).timestamp())


def _image_epoch(spec: BundleSpec, image: Image, modules: Mapping[tuple[str, str], Module]) -> int:
    """The commit time of the image's first binary's module (upstream's SOURCE_DATE_EPOCH);
    for the project's images, which come from no upstream release, the Kubernetes
    release's (0 in a bundle without Kubernetes)."""
    by_source = {f"{m.path}@{m.version}": m for m in modules.values()}
    first = by_source.get(spec.binary(image.files[0][1]).module) if image.files else None
    first = first or modules.get((KUBERNETES_MODULE, f"v{spec.kubernetes}"))
    return _epoch(first) if first else 0


def _image_entries(
    prepared: Prepared, image: Image, partial: Path, tree: Path | None
) -> list[oci.Entry]:
    spec = prepared.spec
    entries = rootfs.tree_entries(tree) if tree is not None else []
    entries += [
        oci.Entry(path, "file", 0o755, source=partial / spec.binary(binary).path)
        for path, binary in image.files
    ]
    host = prepared.trees.get(image.name)
    if host is not None:
        entries += host.entries
    entries += [oci.Entry(path, "symlink", 0o777, target=target) for path, target in image.links]
    if image.program:
        program = partial / "programs" / image.program.rsplit("/", 1)[-1]
        program.parent.mkdir(parents=True, exist_ok=True)
        program.write_bytes(training_program())
        entries.append(oci.Entry(image.program.lstrip("/"), "file", 0o644, source=program))
    return entries


def _images(
    prepared: Prepared,
    modules: Mapping[tuple[str, str], Module],
    runner: Runner,
    partial: Path,
    note: Note,
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, str]]]:
    """The images' digests and sizes; the Debian packages of the root file systems."""
    spec = prepared.spec
    out, packages = {}, {}
    for image in spec.images:
        tree = None
        if image.rootfs is not None:
            tree, packages[image.name] = rootfs.ensure(image.rootfs, prepared.root, runner, note)
        note(f"image {image.reference}")
        started = time.monotonic()
        written = oci.write_layout(
            partial / "images" / image.name,
            _image_entries(prepared, image, partial, tree),
            oci.ImageConfig(image.entrypoint, (PATH_ENV, *image.env), image.user),
            reference=image.reference,
            tag=image.tag,
            epoch=_image_epoch(spec, image, modules),
        )
        if image.rootfs is not None:
            runner.record(f"image-{image.name}", time.monotonic() - started)
        digest = written.manifest_digest.removeprefix("sha256:")
        out[f"image:{image.name}"] = {"sha256": digest, "size": written.size}
    return out, packages
