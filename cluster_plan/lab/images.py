"""Node images: the packages the roles install, built once per machine into layers that
nodes overlay above the base image, as image-based sites provision their nodes.

A plan with `lab.image: packages` gives each node the base image, a layer with what every
imaged host gets, and a layer with the rest of its own package set (hosts with the same set
share it); the roles then find their packages installed and go on configuring. Hosts the
plan lists in `lab.bare`, and hosts that join a running lab (`cluster-plan change` adding a
node), boot the bare base, so the roles' install path stays proven.

Each layer is the upper directory of an overlay on the layers below, filled by apt in a
chroot (in a mount and PID namespace of its own, so nothing of it outlives the build) from
the Debian archive, as debootstrap filled the base; no service starts during the build
(policy-rc.d), and the units a package enables stay enabled. A layer's key is a hash of its
packages, the layer below (or the base's key) and this recipe: a changed package list builds
new layers and an unchanged one is reused. Layers are built under a lock, in a `.partial`
directory renamed when complete, under CACHE_ROOT; never in the repository.
"""

from __future__ import annotations

import fcntl
import hashlib
import shlex
import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from pathlib import Path
from typing import Any, cast

from cluster_plan.lab.names import CACHE_ROOT, LabError
from cluster_plan.lab.node import BASE_DEVICES
from cluster_plan.lab.proc import run
from cluster_plan.lab.role_packages import HostPackages
from cluster_plan.lab.rootfs import SUITE
from cluster_plan.plan.contract import ExpandedPlan

RECIPE_VERSION = "1"
BUILD_TIMEOUT_S = 1800
# Nothing starts in the chroot: the node's systemd starts what the packages enabled at boot.
POLICY_RC_D = "#!/bin/sh\n# cluster-plan lab image build: nothing starts in the chroot\nexit 101\n"
APT_OPTIONS = ("-q", "-y", "-o", "Dpkg::Use-Pty=0")
# Units a package enables that fail at a lab node's boot, each with why: the image leaves
# them disabled, and the role that runs them enables them once it has set them up. Every
# other unit stays as its package leaves it.
DISABLED_UNITS = {
    # Debian's unit has PrivateUsers=true, which a node cannot do (217/USER) until the
    # monitoring role's lab drop-in turns it off; enabled, it leaves the node "degraded".
    "prometheus.service": "PrivateUsers= needs a user namespace, which a lab node cannot make",
}
# What the build leaves that must be each node's own, or is stale (as the base image does).
CLEANUP = (
    "rm -f /usr/sbin/policy-rc.d",
    "rm -f /var/lib/apt/lists/*_Packages /var/cache/apt/*.bin",
    ": > /etc/machine-id",
    "rm -f /var/lib/dbus/machine-id /etc/ssh/ssh_host_*",
)
# The file in a node's folder naming the image it boots on (its lowerdirs, top first).
IMAGE_FILE = "image"


@dataclass(frozen=True)
class Layer:
    """Packages installed over the layer below (None: over the base image)."""

    packages: HostPackages
    below: Layer | None
    base_key: str

    @property
    def key(self) -> str:
        recipe = "\n".join(
            [
                RECIPE_VERSION,
                self.base_key,
                self.below.key if self.below else "",
                "recommends:",
                *sorted(self.packages.recommends),
                "plain:",
                *sorted(self.packages.plain),
                POLICY_RC_D,
                *CLEANUP,
                *sorted(DISABLED_UNITS),
            ]
        )
        return hashlib.sha256(recipe.encode()).hexdigest()[:16]

    @property
    def name(self) -> str:
        return f"layer-{SUITE}-{self.key}"

    def chain(self) -> tuple[Layer, ...]:
        """This layer and those below it, top first (overlayfs' lowerdir order)."""
        return (self, *(self.below.chain() if self.below else ()))


def image_setting(expanded: ExpandedPlan) -> tuple[str, list[str]]:
    """The plan's `lab.image`, and the hosts of `lab.bare` (each a host of the plan)."""
    lab: Mapping[str, Any] = expanded.get("lab") or {}
    bare = [str(name) for name in lab.get("bare") or []]
    for i, name in enumerate(bare):
        if name not in expanded["hosts"]:
            raise LabError(f"lab.bare[{i}]: {name} is not a host of the plan")
    return str(lab.get("image") or "bare"), bare


def with_image(expanded: ExpandedPlan, image: str) -> ExpandedPlan:
    """The plan with another `lab.image` (`lab up --image`); a plan without a lab section
    stays as it is (the lab refuses it with its own message)."""
    lab = expanded.get("lab")
    if lab is None:
        return expanded
    return cast(ExpandedPlan, {**expanded, "lab": {**lab, "image": image}})


def node_layers(
    expanded: ExpandedPlan, packages: Mapping[str, HostPackages], base_key: str
) -> dict[str, tuple[Layer, ...]]:
    """Each host's layers above the base image, top first; () for a host that boots the
    bare base (the plan's `lab.image` is `bare`, or the host is in `lab.bare`)."""
    image, bare = image_setting(expanded)
    found: dict[str, tuple[Layer, ...]] = {host: () for host in expanded["hosts"]}
    imaged = [h for h in found if h not in bare] if image == "packages" else []
    if not imaged:
        return found
    common = reduce(lambda a, b: a & b, (packages[h] for h in imaged))
    shared = Layer(common, None, base_key) if common.names else None
    for host in imaged:
        own = packages[host] - common
        top = Layer(own, shared, base_key) if own.names else shared
        found[host] = top.chain() if top is not None else ()
    return found


def layer_tree(layer: Layer, cache: Path = CACHE_ROOT) -> Path:
    return cache / layer.name / "tree"


def lowerdirs(layers: Sequence[Layer], base: Path, cache: Path = CACHE_ROOT) -> list[Path]:
    """A node's lowerdirs, top first: its layers' trees, then the base image."""
    return [*(layer_tree(layer, cache) for layer in layers), base]


def ensure(
    layers: Sequence[Layer],
    base: Path,
    cache: Path = CACHE_ROOT,
    log_dir: Path | None = None,
    say: Any = None,
) -> list[Path]:
    """The node's lowerdirs, building (once per machine) the layers not yet in the cache,
    bottom first. `say(text)` hears of each build."""
    for depth in range(len(layers) - 1, -1, -1):
        layer = layers[depth]
        if (cache / layer.name / ".complete").exists():
            continue
        cache.mkdir(parents=True, exist_ok=True)
        with open(cache / "images.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another lab may be building the same layer
            if (cache / layer.name / ".complete").exists():
                continue
            started = time.monotonic()
            log = log_dir / f"{layer.name}.log" if log_dir else None
            _build(layer, lowerdirs(layers[depth + 1 :], base, cache), cache, log)
            if say is not None:
                count = len(layer.packages.names)
                say(f"node image {layer.name} ({count} packages) built in "
                    f"{time.monotonic() - started:.0f}s")  # fmt: skip
    return lowerdirs(layers, base, cache)


def build_script(layer: Layer, lower: Sequence[Path], work: Path, archives: Path) -> str:
    """The build, run as PID 1 of its own mount and PID namespaces: apt in a chroot on an
    overlay whose upper directory becomes the layer."""
    q = shlex.quote
    lines = [
        "#!/bin/sh",
        "set -e",
        f"R={q(str(work / 'root'))}",
        "mount -t overlay overlay -o "
        + q(
            f"lowerdir={':'.join(str(p) for p in lower)},upperdir={work / 'tree'},"
            f"workdir={work / 'work'},redirect_dir=off,index=off,metacopy=off"
        )
        + ' "$R"',
        'mount -t proc proc "$R/proc"',
        'mount -t sysfs -o ro sysfs "$R/sys"',
        'mount -t tmpfs -o mode=755,size=8m dev "$R/dev"',
        *(f'mknod -m 666 "$R/dev/{n}" {k} {ma} {mi}' for n, k, ma, mi in BASE_DEVICES),
        'mkdir "$R/dev/pts"',
        'mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$R/dev/pts"',
        'ln -s pts/ptmx "$R/dev/ptmx"',
        'mount -t tmpfs -o mode=755 run "$R/run"',
        'mount -t tmpfs -o mode=1777 tmp "$R/tmp"',
        # the host's resolver for deb.debian.org, as debootstrap used; never written to the layer
        'mount --bind /etc/resolv.conf "$R/etc/resolv.conf"',
        # downloaded packages stay on this machine for the next build, out of the layer
        f'mount --bind {q(str(archives))} "$R/var/cache/apt/archives"',
        f"printf '%s' {q(POLICY_RC_D)} > \"$R/usr/sbin/policy-rc.d\"",
        'chmod 755 "$R/usr/sbin/policy-rc.d"',
    ]
    apt = (
        'chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root '
        "LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive apt-get " + " ".join(APT_OPTIONS)
    )
    lines.append(f"{apt} update")
    if layer.packages.recommends:
        lines.append(f"{apt} install {' '.join(map(q, sorted(layer.packages.recommends)))}")
    if layer.packages.plain:
        lines.append(
            f"{apt} install --no-install-recommends "
            + " ".join(map(q, sorted(layer.packages.plain)))
        )
    lines += [
        f'if [ -e "$R/lib/systemd/system/{unit}" ]; then chroot "$R" systemctl disable {unit}; fi'
        for unit in sorted(DISABLED_UNITS)
    ]
    lines += [f'chroot "$R" /bin/sh -c {q(step)}' for step in CLEANUP]
    return "\n".join(lines) + "\n"


def _build(layer: Layer, lower: Sequence[Path], cache: Path, log: Path | None) -> None:
    target = cache / layer.name
    work = target.with_name(target.name + ".partial")
    if work.exists():  # an interrupted build; its mounts died with its namespace
        shutil.rmtree(work)
    for part in ("tree", "work", "root"):
        (work / part).mkdir(parents=True)
    archives = cache / "image-archives"
    (archives / "partial").mkdir(parents=True, exist_ok=True)
    script = work / "build.sh"
    script.write_text(build_script(layer, lower, work, archives))
    started = time.monotonic()
    argv = ["unshare", "--mount", "--pid", "--fork", "--kill-child", "/bin/sh", str(script)]
    result = run(argv, check=False, timeout=BUILD_TIMEOUT_S)
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(result.stdout + result.stderr)
    if result.returncode != 0:
        tail = "\n  ".join((result.stdout + result.stderr).strip().splitlines()[-8:])
        raise LabError(
            f"building the node image {layer.name} failed ({result.returncode}):\n  {tail}"
        )
    shutil.rmtree(work / "work")
    (work / "root").rmdir()
    script.unlink()
    (work / "packages.txt").write_text(
        "".join(f"{p}\n" for p in sorted(layer.packages.recommends))
        + "".join(f"{p} (no recommends)\n" for p in sorted(layer.packages.plain))
    )
    (work / ".complete").write_text(f"built in {time.monotonic() - started:.0f}s\n")
    work.rename(target)


def record(node_dir: Path, lower: Iterable[Path]) -> None:
    """Write down the image a node boots on: its disk (the overlay's upper) only makes sense
    on the same one, on every later boot."""
    node_dir.mkdir(parents=True, exist_ok=True)
    (node_dir / IMAGE_FILE).write_text("".join(f"{p}\n" for p in lower))


def recorded(node_dir: Path) -> list[Path] | None:
    """The image a node booted on, while every part of it is still in the cache."""
    try:
        lower = [Path(line) for line in (node_dir / IMAGE_FILE).read_text().splitlines() if line]
    except OSError:
        return None
    return lower if lower and all(p.is_dir() for p in lower) else None


def describe(lower: Sequence[Path] | None) -> str:
    """What a node boots on, in a word: `bare` (the base image) or its top layer's name."""
    if not lower:
        return "-"
    return "bare" if len(lower) == 1 else lower[0].parent.name
