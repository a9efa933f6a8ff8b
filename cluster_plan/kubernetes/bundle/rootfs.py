"""A Debian root file system for an image the project builds (the training image), made as
the lab makes its node images (cluster_plan/lab/rootfs.py, lab/images.py): debootstrap's
minbase, then the packages with apt in a chroot, in mount and PID namespaces of their own (no
mount outlives the build, no service starts: policy-rc.d), cached by the recipe's key:

    <cache>/rootfs/<suite>-<key>/tree/           the root file system, never in the repository
    <cache>/rootfs/<suite>-<key>/packages.json   every installed package and its version
    <cache>/rootfs/<suite>-<key>.lock            held while it builds
    <cache>/rootfs/.partial-<suite>-<key>/       a build in progress, or a failed one
    <cache>/rootfs/debs/                         the downloaded packages, for the next build

The key is the recipe's (suite, archive, package list): the versions are those of the day the
tree was built, listed in packages.json and in the bundle's manifest.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

from cluster_plan.kubernetes.bundle import cache, oci
from cluster_plan.kubernetes.bundle.gobuild import BuildError, Runner
from cluster_plan.kubernetes.bundle.project import Rootfs

COMPLETE = "packages.json"
POLICY_RC_D = "#!/bin/sh\n# cluster-plan image build: nothing starts in the chroot\nexit 101\n"
APT = (
    'chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 '
    "DEBIAN_FRONTEND=noninteractive apt-get -q -y -o Dpkg::Use-Pty=0"
)
# What the build leaves that is no part of an image: apt's indexes, logs with the day's
# times, the machine's identity, the device nodes debootstrap made (a runtime makes /dev)
CLEANUP = (
    "rm -f /usr/sbin/policy-rc.d",
    "rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/debconf/*-old",
    "rm -rf /var/log/* /var/lib/dpkg/*-old",
    ": > /etc/machine-id",
    ": > /etc/resolv.conf",
    "rm -f /etc/hostname /var/lib/dbus/machine-id",
    "find /dev -mindepth 1 -delete",
)
# Kept as empty directories in an image: the runtime mounts them
EMPTY_IN_IMAGE = ("dev", "proc", "sys", "run", "tmp")
Note = Callable[[str], None]


def packages_script(rootfs: Rootfs, tree: Path, debs: Path) -> str:
    """apt in the chroot, as PID 1 of its own mount and PID namespaces."""
    q = shlex.quote
    lines = [
        "#!/bin/sh",
        "set -e",
        f"R={q(str(tree))}",
        'mount -t proc proc "$R/proc"',
        'mount -t tmpfs -o mode=1777 tmp "$R/tmp"',
        # the machine's resolver for the archive; never written to the tree
        'mount --bind /etc/resolv.conf "$R/etc/resolv.conf"',
        f'mount --bind {q(str(debs))} "$R/var/cache/apt/archives"',
        f"printf '%s' {q(rootfs.sources)} > \"$R/etc/apt/sources.list\"",
        f"printf '%s' {q(POLICY_RC_D)} > \"$R/usr/sbin/policy-rc.d\"",
        'chmod 755 "$R/usr/sbin/policy-rc.d"',
        f"{APT} update",
        f"{APT} install --no-install-recommends {' '.join(map(q, sorted(rootfs.packages)))}",
        'umount "$R/var/cache/apt/archives" "$R/etc/resolv.conf" "$R/tmp" "$R/proc"',
        *(f'chroot "$R" /bin/sh -c {q(step)}' for step in CLEANUP),
    ]
    return "\n".join(lines) + "\n"


def _directory(root: Path, rootfs: Rootfs) -> Path:
    return root / "rootfs" / rootfs.name


def built(root: Path, rootfs: Rootfs) -> tuple[Path, dict[str, str]] | None:
    """The tree and its packages, if the cache has it complete."""
    directory = _directory(root, rootfs)
    if not (directory / COMPLETE).is_file():
        return None
    return directory / "tree", json.loads((directory / COMPLETE).read_text())


def ensure(rootfs: Rootfs, root: Path, runner: Runner, note: Note) -> tuple[Path, dict[str, str]]:
    """The tree and its packages, built first (under the key's lock) when the cache lacks it."""
    found = built(root, rootfs)
    if found is not None:
        return found
    directory = _directory(root, rootfs)
    with cache.locked(directory.with_name(directory.name + ".lock"), note):
        return built(root, rootfs) or _build(rootfs, directory, runner, note)


def _build(
    rootfs: Rootfs, directory: Path, runner: Runner, note: Note
) -> tuple[Path, dict[str, str]]:
    if shutil.which("debootstrap") is None:
        raise BuildError("debootstrap is not installed: apt-get install debootstrap", unserved=True)
    partial = directory.with_name(f".partial-{directory.name}")
    if partial.exists():  # a failed build; its mounts died with its namespace
        shutil.rmtree(partial)
    tree, debs = partial / "tree", directory.parent / "debs"
    (debs / "partial").mkdir(parents=True, exist_ok=True)
    tree.mkdir(parents=True)
    note(f"rootfs {rootfs.name}: debootstrap {rootfs.suite} and {', '.join(rootfs.packages)}")
    isolated = ["unshare", "--mount", "--pid", "--fork", "--kill-child"]
    runner.run(
        "rootfs-debootstrap",
        [*isolated, "debootstrap", "--variant=minbase", f"--cache-dir={debs}",
         rootfs.suite, str(tree), rootfs.mirror],
    )  # fmt: skip
    script = partial / "packages.sh"
    script.write_text(packages_script(rootfs, tree, debs))
    runner.run("rootfs-packages", [*isolated, "/bin/sh", str(script)])
    listed = runner.run(
        "rootfs-list", ["chroot", str(tree), "dpkg-query", "-W", "-f", "${Package} ${Version}\\n"]
    )
    packages = dict(line.split(" ", 1) for line in listed.splitlines() if " " in line)
    script.unlink()
    (partial / COMPLETE).write_text(json.dumps(packages, indent=2, sort_keys=True) + "\n")
    partial.rename(directory)
    return directory / "tree", packages


def _entry(tree: Path, path: Path, seen: dict[tuple[int, int], str]) -> oci.Entry:
    relative = path.relative_to(tree).as_posix()
    info = path.lstat()
    mode, uid, gid = stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid
    if stat.S_ISLNK(info.st_mode):
        return oci.Entry(relative, "symlink", mode, target=os.readlink(path), uid=uid, gid=gid)
    if stat.S_ISDIR(info.st_mode):
        return oci.Entry(relative, "dir", mode, uid=uid, gid=gid)
    if not stat.S_ISREG(info.st_mode):
        raise BuildError(f"{path}: neither a file, a directory nor a link; no image holds it")
    first = seen.setdefault((info.st_dev, info.st_ino), relative)
    if first != relative:
        return oci.Entry(relative, "hardlink", mode, target=first, uid=uid, gid=gid)
    return oci.Entry(relative, "file", mode, source=path, uid=uid, gid=gid)


def tree_entries(tree: Path) -> list[oci.Entry]:
    """Every file, directory and link of the tree as layer entries, owners and modes kept,
    hard links as links to the first path (in name order) of their file."""
    paths = []
    for top, folders, files in os.walk(tree):  # links to folders are listed, not followed
        here = Path(top)
        if here != tree and here.relative_to(tree).parts[0] in EMPTY_IN_IMAGE:
            folders.clear()
            continue
        paths += [here / name for name in (*folders, *files)]
    paths.sort(key=lambda p: p.relative_to(tree).as_posix())
    seen: dict[tuple[int, int], str] = {}
    return [_entry(tree, path, seen) for path in paths]
