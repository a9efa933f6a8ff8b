"""The Debian 12 base root file system every node overlays, built once and cached.

The cache key is a hash of everything that shapes the image (suite, packages, the
customisation below), so the image is rebuilt only when one of them changes.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import time
from pathlib import Path

from cluster_plan.lab.names import CACHE_ROOT, LabError
from cluster_plan.lab.proc import run

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
# What a node needs to boot and be managed by Ansible; anything a role installs stays out.
PACKAGES = (
    "openssh-server",
    "python3",
    "python3-apt",
    "iproute2",
    "systemd",
    "systemd-sysv",
    "dbus",
)
# Units that cost memory or fail in a namespace and that no role relies on.
MASKED_UNITS = (
    "getty.target",
    "console-getty.service",
    "e2scrub_all.timer",
    "e2scrub_reap.service",
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "dpkg-db-backup.timer",
    "fstrim.timer",
    "sys-kernel-debug.mount",
    "sys-kernel-tracing.mount",
    "sys-kernel-config.mount",
    "sys-fs-fuse-connections.mount",
    "dev-hugepages.mount",
    "systemd-modules-load.service",
    "systemd-remount-fs.service",
    "proc-sys-fs-binfmt_misc.automount",
    # udev: roles install it for its udevadm (ceph-volume needs it), but its daemon and
    # triggers would write uevents for the host's own devices through the node's /sys.
    "systemd-udevd.service",
    "systemd-udevd-control.socket",
    "systemd-udevd-kernel.socket",
    "systemd-udev-trigger.service",
    "systemd-udev-settle.service",
    # Pulled in with nvme-cli (a ceph-osd dependency); there is no NVMe fabric to reach.
    "nvmf-autoconnect.service",
    # Pulled in with uuid-runtime (ceph-mgr); its PrivateUsers= cannot work in a node, and
    # libuuid generates UUIDs without the daemon.
    "uuidd.socket",
    "uuidd.service",
    # Pulled in with nfs-common (the nfs role on NFS servers); the host's kernel has no sunrpc
    # module, so the mount fails and leaves the node "degraded" (nothing in a node needs it).
    "run-rpc_pipefs.mount",
)
SOURCES = f"""deb {MIRROR} {SUITE} main
deb {MIRROR} {SUITE}-updates main
deb http://security.debian.org/debian-security {SUITE}-security main
"""
JOURNALD = "[Journal]\nStorage=volatile\nRuntimeMaxUse=16M\n"
# Every node makes its own host keys on first boot instead of sharing the image's.
SSH_DROPIN = """[Service]
ExecStartPre=
ExecStartPre=/usr/bin/ssh-keygen -A
ExecStartPre=/usr/sbin/sshd -t
"""
RECIPE_VERSION = "3"


def cache_key() -> str:
    recipe = "\n".join(
        [
            RECIPE_VERSION,
            SUITE,
            MIRROR,
            *sorted(PACKAGES),
            *MASKED_UNITS,
            SOURCES,
            JOURNALD,
            SSH_DROPIN,
        ]
    )
    return hashlib.sha256(recipe.encode()).hexdigest()[:16]


def base_dir(cache: Path = CACHE_ROOT) -> Path:
    return cache / f"rootfs-{SUITE}-{cache_key()}"


def ensure_base(cache: Path = CACHE_ROOT, log: Path | None = None) -> Path:
    """Return the cached base image, building it first when missing (about a minute)."""
    target = base_dir(cache)
    if (target / ".complete").exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / "rootfs.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / ".complete").exists():
            return target
        _build(target, log)
    return target


def _build(target: Path, log: Path | None) -> None:
    if shutil.which("debootstrap") is None:
        raise LabError("debootstrap is not installed: apt-get install debootstrap")
    work = target.with_name(target.name + ".partial")
    if work.exists():  # an interrupted build: debootstrap may have left /proc, /sys mounted
        _unmount_under(work)
        shutil.rmtree(work)
    started = time.monotonic()
    result = run(
        [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(PACKAGES)}",
            SUITE,
            str(work),
            MIRROR,
        ],
        check=False,
        timeout=900,
    )
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(result.stdout + result.stderr)
    if result.returncode != 0:
        tail = "\n  ".join((result.stdout + result.stderr).strip().splitlines()[-5:])
        raise LabError(f"debootstrap failed ({result.returncode}):\n  {tail}")
    _customise(work)
    (work / ".complete").write_text(f"built in {time.monotonic() - started:.0f}s\n")
    work.rename(target)


def _unmount_under(root: Path) -> None:
    """Detach every mount below root, deepest first, so rmtree never descends into one."""
    prefix = str(root.resolve()) + "/"
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    for point in sorted((p for p in points if p.startswith(prefix)), key=len, reverse=True):
        run(["umount", "-l", point], check=False)


def _customise(root: Path) -> None:
    (root / "etc/apt/sources.list").write_text(SOURCES)
    (root / "etc/hostname").unlink(missing_ok=True)
    (root / "etc/machine-id").write_text("")  # empty: systemd gives each node its own
    (root / "var/lib/dbus/machine-id").unlink(missing_ok=True)
    (root / "etc/resolv.conf").unlink(missing_ok=True)
    (root / "etc/resolv.conf").write_text("")
    (root / "etc/fstab").write_text("")
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    dropin = root / "etc/systemd/system/ssh.service.d"
    dropin.mkdir(parents=True, exist_ok=True)
    (dropin / "lab-host-keys.conf").write_text(SSH_DROPIN)
    journald = root / "etc/systemd/journald.conf.d"
    journald.mkdir(parents=True, exist_ok=True)
    (journald / "lab.conf").write_text(JOURNALD)
    for unit in MASKED_UNITS:
        link = root / "etc/systemd/system" / unit
        link.unlink(missing_ok=True)
        link.symlink_to("/dev/null")
    shutil.rmtree(root / "var/cache/apt/archives", ignore_errors=True)
    (root / "var/cache/apt/archives/partial").mkdir(parents=True, exist_ok=True)
    for lists in (root / "var/lib/apt/lists").glob("*_Packages"):
        lists.unlink()
