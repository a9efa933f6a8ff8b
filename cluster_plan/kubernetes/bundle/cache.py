"""Where built bundles live, and what makes one the same as another.

    $CLUSTER_PLAN_CACHE (default /var/cache/cluster-plan)/
      go/mod/                  GOMODCACHE of every bundle build: module sources, fetched once
      go/build/                GOCACHE: compiled packages, so a rebuild only links
      k8s/<version>-<key>/     one complete bundle (manifest.json last, then renamed here)
      k8s/<version>-<key>.lock held while that bundle builds
      k8s/.partial-<version>-<key>/   the build in progress (or a failed one, removed by the next)

The key is the hash of everything that decides the bundle's bytes: the recipe (versions,
packages, tags, ldflags, image contents), the Go release, the C compiler, and the Debian
packages whose files are compiled in (libseccomp, libc) or copied into an image. Pure, but
for `toolchain`, which asks the tools.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENVIRONMENT = "CLUSTER_PLAN_CACHE"
DEFAULT_ROOT = Path("/var/cache/cluster-plan")
# Bumped when the builder changes what it makes from the same recipe.
BUILDER_VERSION = 1
# Debian packages whose files end up in a binary: runc links libseccomp and glibc statically,
# pause glibc
BUILD_PACKAGES = ("gcc", "libc6-dev", "libseccomp-dev")
MANIFEST = "manifest.json"
_GCC_VERSION = re.compile(r"^gcc\S* \(.*\) (\S+)", re.M)


class ToolMissing(RuntimeError):
    """Go or the C compiler is not installed; str() says what to install."""


@dataclass(frozen=True)
class Toolchain:
    go: str  # "go1.26.8"
    goos: str
    goarch: str
    gcc: str  # "12.2.0"
    packages: Mapping[str, str]  # Debian package -> version (BUILD_PACKAGES)

    def recipe(self) -> dict[str, Any]:
        return {
            "go": self.go,
            "platform": f"{self.goos}/{self.goarch}",
            "gcc": self.gcc,
            "packages": dict(sorted(self.packages.items())),
        }


def cache_root(option: Path | None = None, environ: Mapping[str, str] = os.environ) -> Path:
    """--cache, else $CLUSTER_PLAN_CACHE, else /var/cache/cluster-plan."""
    if option is not None:
        return option
    value = environ.get(ENVIRONMENT)
    return Path(value) if value else DEFAULT_ROOT


def bundle_key(
    recipe: Mapping[str, Any], toolchain: Toolchain, image_packages: Mapping[str, str]
) -> str:
    """16 hex digits of the sha256 of everything that decides the bundle's bytes."""
    document = {
        "builder": BUILDER_VERSION,
        "recipe": recipe,
        "toolchain": toolchain.recipe(),
        "image_packages": dict(sorted(image_packages.items())),
    }
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def entry_name(kubernetes: str, key: str) -> str:
    return f"{kubernetes}-{key}"


def is_complete(entry: Path) -> bool:
    """A bundle directory counts once it is renamed into place, manifest written last."""
    return (entry / MANIFEST).is_file()


def go_environment(root: Path, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The environment of every go command: the bundle's own module and build caches, no
    workspace, no toolchain download, no VCS stamp (the sources are module zips); GOPROXY,
    GOSUMDB and GOPRIVATE as the user set them (a site's own proxy)."""
    env = {k: v for k, v in environ.items() if not k.startswith(("GO", "CGO_"))}
    keep = ("GOROOT", "GOPROXY", "GOSUMDB", "GONOSUMDB", "GOPRIVATE", "GONOPROXY", "GOINSECURE")
    env.update({k: environ[k] for k in keep if k in environ})
    env.update(
        {
            "GOMODCACHE": str(root / "go" / "mod"),
            "GOCACHE": str(root / "go" / "build"),
            "GOWORK": "off",
            "GOTOOLCHAIN": "local",
            "GOFLAGS": "-buildvcs=false -modcacherw",
            "GO111MODULE": "on",
            "GOAMD64": "v1",
            "CC": "gcc",
        }
    )
    return env


def _output(command: list[str], env: Mapping[str, str] | None = None) -> str:
    result = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if result.returncode != 0:
        raise ToolMissing(f"{' '.join(command)} failed: {result.stderr.strip()[-300:]}")
    return result.stdout.strip()


def toolchain(env: Mapping[str, str]) -> Toolchain:
    """Ask go, gcc and dpkg; ToolMissing when go or gcc is not installed."""
    if shutil.which("go", path=env.get("PATH")) is None:
        raise ToolMissing(
            "go is not installed (or not on PATH): the bundle is built from Go sources; "
            "install Go 1.26 from go.dev/dl"
        )
    if shutil.which("gcc", path=env.get("PATH")) is None:
        raise ToolMissing(
            "gcc is not installed: runc (cgo) and pause are C; apt-get install gcc libc6-dev "
            "libseccomp-dev"
        )
    goenv = json.loads(_output(["go", "env", "-json", "GOVERSION", "GOOS", "GOARCH"], dict(env)))
    match = _GCC_VERSION.search(_output(["gcc", "--version"]))
    packages = _installed(BUILD_PACKAGES)
    missing = [p for p in BUILD_PACKAGES if p not in packages]
    if missing:
        raise ToolMissing(f"{' '.join(missing)} not installed: apt-get install {' '.join(missing)}")
    return Toolchain(
        go=goenv["GOVERSION"],
        goos=goenv["GOOS"],
        goarch=goenv["GOARCH"],
        gcc=match.group(1) if match else "unknown",
        packages=packages,
    )


def _installed(names: tuple[str, ...]) -> dict[str, str]:
    if shutil.which("dpkg-query") is None:
        raise ToolMissing("dpkg-query is missing: the bundle is built on Debian or Ubuntu")
    result = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package} ${Status} ${Version}\\n", *names],
        capture_output=True,
        text=True,
        check=False,
    )
    out = {}
    for line in result.stdout.splitlines():
        name, *status, version = line.split(" ")
        if status == ["install", "ok", "installed"]:
            out[name] = version
    return out


@contextmanager
def locked(lock: Path, waiting: Callable[[str], None]) -> Iterator[None]:
    """Hold ``lock`` (flock: released when the process dies, so a killed build never
    leaves it held); say once who holds it when we must wait."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            waiting(f"waiting for {holder}, which is building this bundle ({lock})")
            fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}\n")
        handle.flush()
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()
