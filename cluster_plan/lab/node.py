"""One node: an overlay of the base image booted with systemd as PID 1 in its own
mount, UTS, IPC, PID, cgroup and (lab-made, named) network namespaces.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import time
from collections.abc import Sequence
from pathlib import Path

from cluster_plan.lab.hardware import device_links, device_nodes
from cluster_plan.lab.kubernetes import boot_lines as kubelet_boot_lines
from cluster_plan.lab.kubernetes import exec_line as kubelet_exec_line
from cluster_plan.lab.names import CGROUP_ROOT, LabError, LabNames
from cluster_plan.lab.proc import ProcRef, run, spawn
from cluster_plan.plan.contract import Host

# The device nodes every node gets in its own tmpfs /dev (never the host's /dev).
BASE_DEVICES = (
    ("null", "c", 1, 3),
    ("zero", "c", 1, 5),
    ("full", "c", 1, 7),
    ("random", "c", 1, 8),
    ("urandom", "c", 1, 9),
    ("tty", "c", 5, 0),
    ("fuse", "c", 10, 229),  # user-space file systems (ceph-fuse); the kernel has FUSE
)


def cgroup_hierarchies() -> list[Path]:
    """The host's cgroup mounts (v1 controllers, name=systemd, unified v2)."""
    if (CGROUP_ROOT / "cgroup.procs").exists():  # pure cgroup v2
        return [CGROUP_ROOT]
    return sorted(p for p in CGROUP_ROOT.iterdir() if p.is_dir() and not p.is_symlink())


def make_cgroups(names: LabNames, host: str) -> list[Path]:
    made = []
    for root in cgroup_hierarchies():
        path = root / names.cgroup_rel(host)
        for part in (path.parent.parent, path.parent, path):
            if not part.exists():
                part.mkdir()
                for knob in ("cpuset.cpus", "cpuset.mems"):  # cpuset refuses tasks without
                    if (part / knob).exists() and not (part / knob).read_text().strip():
                        (part / knob).write_text((part.parent / knob).read_text())
        made.append(path / "cgroup.procs")
    return made


def set_frozen(names: LabNames, host: str, frozen: bool) -> bool:
    """Freeze (or thaw) every process of the node (its network stack still answers: the
    `freeze` fault also drops what the node sends). Returns False when this kernel has no
    freezer for the node's cgroup."""
    v1 = CGROUP_ROOT / "freezer" / names.cgroup_rel(host) / "freezer.state"
    v2 = CGROUP_ROOT / names.cgroup_rel(host) / "cgroup.freeze"
    knob, value = (v1, "FROZEN" if frozen else "THAWED") if v1.exists() else (v2, str(int(frozen)))
    if not knob.exists():
        return False
    knob.write_text(value)
    return True


def remove_cgroups(names: LabNames, host: str | None = None) -> None:
    """rmdir the node's cgroups bottom-up (systemd leaves empty slices behind)."""
    for root in cgroup_hierarchies():
        top = root / names.cgroup_rel(host or "x")
        base = top if host else top.parent
        if not base.exists():
            continue
        for path in sorted(
            (p for p in base.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True
        ):
            path.rmdir()
        base.rmdir()
        for parent in (base.parent, base.parent.parent) if not host else (base.parent,):
            with contextlib.suppress(OSError):  # still holds another node or lab
                parent.rmdir()


def prepare_upper(
    names: LabNames, host: str, spec: Host, pubkey: str, nameservers: list[str]
) -> Path:
    """Per-node files written into the overlay's upper layer before boot."""
    upper = names.node_dir(host) / "upper"
    fresh = not upper.exists()
    (names.node_dir(host) / "work").mkdir(parents=True, exist_ok=True)
    (names.node_dir(host) / "root").mkdir(parents=True, exist_ok=True)
    (upper / "etc").mkdir(parents=True, exist_ok=True)
    (upper / "etc/hostname").write_text(f"{spec['hostname']}\n")
    ssh = upper / "root/.ssh"
    ssh.mkdir(parents=True, exist_ok=True, mode=0o700)
    (upper / "root").chmod(0o700)
    keys = ssh / "authorized_keys"
    present = keys.read_text() if keys.exists() else ""
    if pubkey.strip() not in present:  # keep keys the roles added
        keys.write_text(present + ("" if not present or present.endswith("\n") else "\n") + pubkey)
    keys.chmod(0o600)
    if fresh:  # first boot only: afterwards these files belong to the roles
        (upper / "etc/resolv.conf").write_text("".join(f"nameserver {ns}\n" for ns in nameservers))
        fqdn = spec["fqdn"]
        (upper / "etc/hosts").write_text(
            f"127.0.0.1\tlocalhost\n{spec['address']}\t{fqdn} {spec['hostname']}\n"
        )
    return upper


def boot_script(
    names: LabNames, host: str, spec: Host, lower: Sequence[Path], loops: dict[str, str]
) -> str:
    """`lower`: the node's image, top first (its layers, then the base image)."""
    node = names.node_dir(host)
    root = node / "root"
    q = shlex.quote
    lowerdir = ":".join(str(p) for p in lower)
    lines = [
        "#!/bin/sh",
        "set -e",
        f"R={q(str(root))}",
        f"mount -t overlay overlay -o lowerdir={q(lowerdir)},upperdir={q(str(node / 'upper'))}"
        f',workdir={q(str(node / "work"))} "$R"',
        'mount -t proc proc "$R/proc"',
        # Kernel-wide sysctls stay the host's: only the node's own net.* is writable.
        'mount --bind "$R/proc/sys" "$R/proc/sys"',
        'mount --bind "$R/proc/sys/net" "$R/proc/sys/net"',
        'mount -o remount,bind,ro "$R/proc/sys"',
        'mount -t sysfs -o ro sysfs "$R/sys"',
    ]
    hierarchies = cgroup_hierarchies()
    if hierarchies == [CGROUP_ROOT]:
        lines.append('mount -t cgroup2 cgroup2 "$R/sys/fs/cgroup"')
        hierarchies = []
    else:
        lines.append('mount -t tmpfs -o mode=755,size=1m cgroup "$R/sys/fs/cgroup"')
    for hier in hierarchies:
        target = f'"$R/sys/fs/cgroup/{hier.name}"'
        if hier.name == "unified":
            lines += [f"mkdir -p {target}", f"mount -t cgroup2 cgroup2 {target}"]
        else:
            opt = "none,name=systemd" if hier.name == "systemd" else hier.name
            lines += [f"mkdir -p {target}", f"mount -t cgroup -o {opt} cgroup {target}"]
    lines += ['mount -t tmpfs -o mode=755,size=8m,nosuid dev "$R/dev"']
    devices = [*BASE_DEVICES, *device_nodes(spec, loops)]
    for name, kind, major, minor in devices:
        parent = os.path.dirname(name)
        if parent:
            lines.append(f'mkdir -p "$R/dev/{parent}"')
        mode = "660" if kind == "b" else "666"  # disks: root (and group disk) only
        lines.append(f'mknod -m {mode} "$R/dev/{name}" {kind} {major} {minor}')
    for link, target in device_links(spec, loops):
        lines += [f'mkdir -p "$R/dev/{os.path.dirname(link)}"', f'ln -s {target} "$R/dev/{link}"']
    lines += [
        'mkdir "$R/dev/pts" "$R/dev/shm" "$R/dev/mqueue"',
        'mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$R/dev/pts"',
        'ln -s pts/ptmx "$R/dev/ptmx"',
        'ln -s /proc/self/fd "$R/dev/fd"',
        'mount -t tmpfs -o mode=1777,nosuid,nodev shm "$R/dev/shm"',
        'mount -t tmpfs -o mode=755,nosuid,nodev,size=64m run "$R/run"',
        'mount -t tmpfs -o mode=1777,nosuid,nodev tmp "$R/tmp"',
        *kubelet_boot_lines(dict(spec), node),
        f"hostname {q(spec['hostname'])}",
        "export container=other",
        kubelet_exec_line(dict(spec)) or 'exec chroot "$R" /lib/systemd/systemd --system',
    ]
    return "\n".join(lines) + "\n"


def boot(names: LabNames, host: str, script: str) -> tuple[ProcRef, ProcRef]:
    """Start the node; returns (the unshare parent, the node's systemd)."""
    run_dir = names.run_dir / "nodes" / host
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "boot.sh").write_text(script)
    procs = make_cgroups(names, host)
    launcher = run_dir / "launch.sh"
    joins = "".join(f"echo $$ > {shlex.quote(str(p))}\n" for p in procs)
    # The node joins its own cgroups before unsharing, so its cgroup namespace is rooted there.
    launcher.write_text(
        "#!/bin/sh\nset -e\n"
        + joins
        + f"exec nsenter --net=/run/netns/{names.node_ns(host)} unshare --mount --uts --ipc "
        f"--pid --cgroup --fork --kill-child /bin/sh {shlex.quote(str(run_dir / 'boot.sh'))}\n"
    )
    parent = spawn(["/bin/sh", str(launcher)], run_dir / "console.log")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        children = Path(f"/proc/{parent.pid}/task/{parent.pid}/children")
        try:
            kids = children.read_text().split()
        except OSError:
            kids = []
        if kids and _comm(int(kids[0])) == "systemd":
            return parent, ProcRef.of(int(kids[0]))
        if not parent.alive():
            break
        time.sleep(0.05)
    log = (run_dir / "console.log").read_text(errors="replace").strip().splitlines()[-5:]
    raise LabError(f"node {host} did not start systemd:\n  " + "\n  ".join(log))


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def stop(init: ProcRef) -> None:
    """Power the node off: SIGKILL to its PID 1 ends every process in its PID namespace."""
    if init.alive():
        os.kill(init.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while init.alive() and time.monotonic() < deadline:
        time.sleep(0.05)


def nsenter(init: ProcRef, argv: list[str]) -> list[str]:
    return ["nsenter", "-t", str(init.pid), "-a", "-r", "-w", *argv]


def system_state(init: ProcRef) -> str:
    if not init.alive():
        return "dead"
    result = run(nsenter(init, ["systemctl", "is-system-running"]), check=False, timeout=10)
    return result.stdout.strip() or "unknown"


def sshd_listening(init: ProcRef) -> bool:
    """Read the node's own /proc/net/tcp: no packet is sent to find out."""
    try:
        table = Path(f"/proc/{init.pid}/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return False
    return any(f[1].endswith(":0016") and f[3] == "0A" for f in (ln.split() for ln in table))


def memory_mib(names: LabNames, host: str) -> dict[str, float]:
    """An idle node's memory: PSS and RSS summed over its processes, and its memory
    cgroup's charge (which also counts page cache the node caused)."""
    pss = rss = 0
    pids: set[int] = set()
    for hier in cgroup_hierarchies():
        top = hier / names.cgroup_rel(host)
        if hier.name in ("unified", "systemd") or hier == CGROUP_ROOT:
            for procs in top.rglob("cgroup.procs"):
                with contextlib.suppress(OSError):
                    pids.update(int(p) for p in procs.read_text().split())
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    pss += int(line.split()[1])
                elif line.startswith("Rss:"):
                    rss += int(line.split()[1])
    charged = 0.0
    for name in ("memory.usage_in_bytes", "memory.current"):
        for hier in cgroup_hierarchies():
            path = hier / names.cgroup_rel(host) / name
            if path.exists() and not charged:
                charged = int(path.read_text()) / 2**20
    return {
        "pss_mib": pss / 1024,
        "rss_mib": rss / 1024,
        "cgroup_mib": charged,
        "processes": float(len(pids)),
    }
