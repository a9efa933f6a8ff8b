"""What the bundle builds of the project's own, for the plans that need it. Pure: it reads
the project's sources (package data) to hash them, and runs nothing.

**The device plugin** (`cluster-plan-device-plugin`): Go sources shipped in this package
(`go/device-plugin/`: the program and its tests, go.mod with the pinned requirements, go.sum),
built like the upstream components, and an image of it that a DaemonSet runs
(kubernetes/devices.py). For a plan with accelerators the project's plugin serves (generic
classes; in the lab, the stand-ins of both kinds).

Its version and tag are made from its sources, so a changed source is a new tag that no node
has cached under the old name.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

PROJECT_REGISTRY = "cluster-plan.local"  # never resolved: `.local` is no registry's domain
DEVICE_PLUGIN = "cluster-plan-device-plugin"
DEVICE_PLUGIN_MODULE = "cluster-plan.local/device-plugin"
DEVICE_PLUGIN_VERSION = "0.1.0"
DEVICE_PLUGIN_SOURCE = "kubernetes/bundle/go/device-plugin"  # under the cluster_plan package


@dataclass(frozen=True)
class BundleNeeds:
    """What a plan needs of the bundle beyond its Kubernetes release: nothing, for a plan
    whose bundle is the release's alone (its key is the one without needs)."""

    device_plugin: bool = False


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
