"""What the bundle builds of the project's own, for the plans that need it. Pure: it reads
the project's sources (package data) to hash them, and runs nothing.

**The device plugin** (`cluster-plan-device-plugin`): Go sources shipped in this package
(`go/device-plugin/`: the program and its tests, go.mod with the pinned requirements, go.sum),
built like the upstream components, and an image of it that a DaemonSet runs
(kubernetes/devices.py). For a plan with accelerators the project's plugin serves (generic
classes; in the lab, the stand-ins of both kinds).

**The training image** (`cluster-plan-training`): a Debian root file system with the training
class's Debian packages (Debian 12's python3-torch: CPU, gloo) and the project's collectives
and training program, the one the Slurm job runs, at the same path. For a plan whose
training job runs the bundle's image (kubernetes/training.py).

Their tags are made from what they are built from (the plugin's sources; the packages and
the program), so a changed source is a new tag that no node has cached under the old name.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from cluster_plan.lab.rootfs import MIRROR, SOURCES, SUITE

PROJECT_REGISTRY = "cluster-plan.local"  # never resolved: `.local` is no registry's domain
DEVICE_PLUGIN = "cluster-plan-device-plugin"
DEVICE_PLUGIN_MODULE = "cluster-plan.local/device-plugin"
DEVICE_PLUGIN_VERSION = "0.1.0"
DEVICE_PLUGIN_SOURCE = "kubernetes/bundle/go/device-plugin"  # under the cluster_plan package
TRAINING = "cluster-plan-training"
# Where the Slurm nodes have the program too (roles/software): the same path in the image.
TRAINING_PROGRAM = "/usr/local/lib/cluster-plan/cluster-plan-collectives.pyz"
TRAINING_ENV = ("LANG=C.UTF-8",)
ROOTFS_RECIPE_VERSION = "1"


@dataclass(frozen=True)
class TrainingBuild:
    """The Debian build of PyTorch the training class's nodes get (software.environments)."""

    version: str  # the build's version: "1.13"
    packages: tuple[str, ...]  # Debian packages: ("python3-torch",)


@dataclass(frozen=True)
class BundleNeeds:
    """What a plan needs of the bundle beyond its Kubernetes release: nothing, for a plan
    whose bundle is the release's alone (its key is the one without needs)."""

    device_plugin: bool = False
    training: TrainingBuild | None = None


@dataclass(frozen=True)
class Rootfs:
    """A Debian root file system: debootstrap's minbase, then ``packages`` with apt (no
    recommends). The cache keeps one per key (kubernetes/bundle/rootfs.py builds it)."""

    packages: tuple[str, ...]
    suite: str = SUITE
    mirror: str = MIRROR
    sources: str = SOURCES

    def recipe(self) -> dict[str, Any]:
        return {
            "recipe": ROOTFS_RECIPE_VERSION,
            "suite": self.suite,
            "mirror": self.mirror,
            "sources": self.sources,
            "packages": sorted(self.packages),
        }

    @property
    def key(self) -> str:
        return _digest(self.recipe())[:16]

    @property
    def name(self) -> str:
        return f"{self.suite}-{self.key}"


@dataclass(frozen=True)
class LocalGoBuild:
    """A Go program of the project, built from its sources in this package."""

    component: str
    module: str
    version: str  # v0.1.0-<source digest>: the image tag too
    source: str  # the directory under the cluster_plan package
    digest: str  # sha256 of every source file, names and bytes
    binary: str
    directory: str = "bin"

    def recipe(self) -> dict[str, Any]:
        return {
            "module": self.module,
            "version": self.version,
            "source": self.source,
            "digest": self.digest,
            "binary": self.binary,
        }


def _digest(document: Any) -> str:
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def source_files(source: str = DEVICE_PLUGIN_SOURCE) -> dict[str, bytes]:
    """Name -> bytes of the files a Go program shipped in the package is built from (its
    tests are not: a changed test is no new binary, so no new tag)."""
    folder = resources.files("cluster_plan").joinpath(source)
    return {
        item.name: item.read_bytes()
        for item in sorted(folder.iterdir(), key=lambda i: i.name)
        if item.is_file() and not item.name.startswith(".") and not item.name.endswith("_test.go")
    }


@cache
def source_digest(source: str = DEVICE_PLUGIN_SOURCE) -> str:
    sha = hashlib.sha256()
    for name, data in source_files(source).items():
        sha.update(f"{name}\0{len(data)}\0".encode())
        sha.update(data)
    return sha.hexdigest()


def device_plugin_build() -> LocalGoBuild:
    digest = source_digest()
    return LocalGoBuild(
        component="device-plugin",
        module=DEVICE_PLUGIN_MODULE,
        version=f"v{DEVICE_PLUGIN_VERSION}-{digest[:12]}",
        source=DEVICE_PLUGIN_SOURCE,
        digest=digest,
        binary=DEVICE_PLUGIN,
    )


@cache
def training_program() -> bytes:
    """The collectives and training program, as the software role installs it on the nodes."""
    from cluster_plan.node_bundle import bundle

    return bundle("collectives")


def training_tag(build: TrainingBuild) -> str:
    """The build's version and a digest of the root file system's recipe and the program."""
    recipe = {"rootfs": Rootfs(build.packages).recipe(), "program": _program_digest()}
    return f"{build.version}-{_digest(recipe)[:12]}"


def _program_digest() -> str:
    return hashlib.sha256(training_program()).hexdigest()


def program_source() -> str:
    """The program in an image's manifest sources."""
    return f"{TRAINING_PROGRAM.rsplit('/', 1)[-1]}=sha256:{_program_digest()}"
