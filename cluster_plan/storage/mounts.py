"""systemd's names for mount points: the Ceph, NFS and Slurm roles write and start mount
units, whose file names systemd derives from the mounted path."""

from __future__ import annotations


def systemd_mount_unit(path: str) -> str:
    """The name systemd gives the mount unit of `path` (systemd-escape --path --suffix=mount)."""
    trimmed = path.strip("/")
    if not trimmed:
        return "-.mount"
    out = []
    for i, char in enumerate(trimmed):
        if char == "/":
            out.append("-")
        elif char.isalnum() or char in ":_" or (char == "." and i > 0):
            out.append(char)
        else:
            out.append("".join(f"\\x{b:02x}" for b in char.encode()))
    return "".join(out) + ".mount"
