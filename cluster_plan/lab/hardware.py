"""Lab-only hardware stand-ins, so that roles can name the devices the plan promises.

None of these is real hardware:
- hosts whose accelerators are NVIDIA GPUs get /dev/nvidia0..N-1 and /dev/nvidiactl as
  character device nodes (major 195) that nothing drives: Slurm's gres.conf can list them
  and cgroups can fence them, but opening them fails (ENXIO);
- hosts with generic accelerators get /dev/accel/accel0..N-1 (the kernel's accel major);
- disks with `use: osd` become sparse files attached to loop devices, seen in the node as
  /dev/loopN with the stable link /dev/disk/by-id/lab-<disk name>.
"""

from __future__ import annotations

from pathlib import Path

from cluster_plan.lab.names import LabNames
from cluster_plan.lab.proc import run
from cluster_plan.plan.contract import Host

NVIDIA_MAJOR = 195
ACCEL_MAJOR = 261
LOOP_MAJOR = 7
OSD_SPARSE_GIB = 10  # sparse: costs only what is written


def device_nodes(spec: Host, loops: dict[str, str]) -> list[tuple[str, str, int, int]]:
    """(path under /dev, kind, major, minor) of the stand-ins one host gets."""
    nodes: list[tuple[str, str, int, int]] = []
    accel = spec["accelerators"]
    count = accel["count"] if accel else 0
    if accel and accel["kind"] == "gpu":
        nodes += [(f"nvidia{i}", "c", NVIDIA_MAJOR, i) for i in range(count)]
        nodes.append(("nvidiactl", "c", NVIDIA_MAJOR, 255))
    elif count:
        nodes += [(f"accel/accel{i}", "c", ACCEL_MAJOR, i) for i in range(count)]
    for disk in osd_disks(spec):
        loop = loops.get(f"{spec['hostname']}/{disk}")
        if loop:
            nodes.append((Path(loop).name, "b", LOOP_MAJOR, int(loop.removeprefix("/dev/loop"))))
    return nodes


def device_links(spec: Host, loops: dict[str, str]) -> list[tuple[str, str]]:
    """(link under /dev, target) for the stable disk names."""
    links = []
    for disk in osd_disks(spec):
        loop = loops.get(f"{spec['hostname']}/{disk}")
        if loop:
            links.append((f"disk/by-id/lab-{disk}", f"../../{Path(loop).name}"))
    return links


def osd_disks(spec: Host) -> list[str]:
    return [str(d["name"]) for d in spec["disks"] if d["use"] == "osd"]


def attach_disks(names: LabNames, host: str, spec: Host, loops: dict[str, str]) -> None:
    """Back each OSD disk with a sparse file on a loop device (kept in `loops`)."""
    for disk in osd_disks(spec):
        key = f"{host}/{disk}"
        image = names.node_dir(host) / "disks" / f"{disk}.img"
        if key in loops and _backing(loops[key]) == str(image):
            continue
        image.parent.mkdir(parents=True, exist_ok=True)
        with open(image, "ab") as img:
            img.truncate(OSD_SPARSE_GIB << 30)
        loops[key] = run(["losetup", "--find", "--show", str(image)]).stdout.strip()


def detach_disks(names: LabNames, loops: dict[str, str]) -> None:
    """Detach only loop devices whose backing file is one of this lab's images."""
    for key, loop in list(loops.items()):
        host, disk = key.split("/", 1)
        if _backing(loop) == str(names.node_dir(host) / "disks" / f"{disk}.img"):
            run(["losetup", "-d", loop], check=False)
        del loops[key]
    for image in names.var_dir.glob("nodes/*/disks/*.img"):
        for line in run(["losetup", "-j", str(image)], check=False).stdout.splitlines():
            run(["losetup", "-d", line.split(":", 1)[0]], check=False)


def detach_host_disks(names: LabNames, host: str, loops: dict[str, str]) -> None:
    """Detach one node's disks (only loops backed by its own images) and forget them."""
    for key, loop in list(loops.items()):
        if not key.startswith(host + "/"):
            continue
        if _backing(loop) == str(names.node_dir(host) / "disks" / f"{key.split('/', 1)[1]}.img"):
            run(["losetup", "-d", loop], check=False)
        del loops[key]


def detach_images(folder: Path) -> None:
    """Detach every loop device backed by an image in `folder` (one node's disks), whatever
    the state says: a run stopped between attaching and recording leaves such loops."""
    for image in folder.glob("*.img"):
        for line in run(["losetup", "-j", str(image)], check=False).stdout.splitlines():
            run(["losetup", "-d", line.split(":", 1)[0]], check=False)


def _backing(loop: str) -> str:
    try:
        return Path(f"/sys/block/{Path(loop).name}/loop/backing_file").read_text().strip()
    except OSError:
        return ""
