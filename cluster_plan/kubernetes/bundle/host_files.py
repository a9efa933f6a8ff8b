"""Programs an image takes from this machine's Debian packages, with everything they load.

kube-proxy execs `nft` and iptables, which are C programs with shared libraries: the image
gets the programs, the libraries `ldd` resolves for them (the dynamic loader included), each
under its real path with the symlinks that lead there (/lib -> usr/lib on a merged-/usr
Debian), and the Debian package and version of every file, for the manifest and the cache
key. The parsing is pure; `host_tree` runs ldd and dpkg-query.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cluster_plan.kubernetes.bundle.oci import Entry

_LDD_LINK = re.compile(r"^\s*\S+ => (/\S+) \(0x[0-9a-f]+\)$")
_LDD_DIRECT = re.compile(r"^\s*(/\S+) \(0x[0-9a-f]+\)$")
_LDD_MISSING = re.compile(r"^\s*(\S+) => not found$")
_DPKG_OWNER = re.compile(r"^([a-z0-9][a-z0-9+.-]*)(?::[a-z0-9]+)?(?:, [^:]+)*: (/.*)$")


class HostFilesError(RuntimeError):
    """A file the image needs is missing here or comes from no package; str() says which."""


@dataclass(frozen=True)
class HostTree:
    entries: tuple[Entry, ...]
    packages: dict[str, str]  # Debian package -> version


def ldd_libraries(output: str) -> list[str]:
    """The library paths in `ldd FILE...` output (the dynamic loader included); a library
    ldd could not find is an error."""
    libraries = []
    for line in output.splitlines():
        if missing := _LDD_MISSING.match(line):
            raise HostFilesError(f"ldd: {missing.group(1)} not found")
        if link := _LDD_LINK.match(line) or _LDD_DIRECT.match(line):
            libraries.append(link.group(1))
    return sorted(set(libraries))


def dpkg_owners(output: str) -> dict[str, str]:
    """Path -> package from `dpkg-query -S PATH...` output."""
    owners = {}
    for line in output.splitlines():
        if match := _DPKG_OWNER.match(line.strip()):
            owners[match.group(2)] = match.group(1)
    return owners


def _chain(path: str) -> tuple[list[Entry], str]:
    """The symlinks met on the way to ``path``'s real file, and that file's real path."""
    links: list[Entry] = []
    current = os.path.normpath(path)
    for _ in range(40):  # as the kernel's limit on symlinks in one lookup
        parts = current.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            prefix = "/" + "/".join(parts[:i])
            if os.path.islink(prefix):
                target = os.readlink(prefix)
                links.append(Entry(prefix.lstrip("/"), "symlink", 0o777, target=target))
                resolved = os.path.join(os.path.dirname(prefix), target)
                current = os.path.normpath("/".join([resolved, *parts[i:]]))
                break
        else:
            return links, current
    raise HostFilesError(f"{path}: too many levels of symbolic links")


def _run(command: Sequence[str]) -> str:
    if shutil.which(command[0]) is None:
        raise HostFilesError(
            f"{command[0]} is not installed: it finds what kube-proxy's image needs"
        )
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    return result.stdout + result.stderr


def _walk(directory: str) -> list[str]:
    if not os.path.isdir(directory):
        raise HostFilesError(f"{directory} is missing on this machine")
    return sorted(str(p) for p in Path(directory).iterdir())


def _entries(paths: Iterable[str]) -> tuple[dict[str, Entry], dict[str, str]]:
    """Entries for ``paths`` (symlinks as they are), and each real file -> the path asked."""
    entries: dict[str, Entry] = {}
    real_files: dict[str, str] = {}
    for path in paths:
        links, real = _chain(path)
        for link in links:
            entries[link.path] = link
        if not os.path.isfile(real):
            raise HostFilesError(f"{path} is missing on this machine")
        mode = os.stat(real).st_mode & 0o7777
        entries[real.lstrip("/")] = Entry(real.lstrip("/"), "file", mode, source=Path(real))
        real_files[real] = path
    return entries, real_files


def _packages(real_files: dict[str, str]) -> dict[str, str]:
    """Package -> version of every file; dpkg knows a file by the path it was packaged at,
    which on a merged-/usr system may be the one before the symlinks or after them."""
    asked = sorted({*real_files, *real_files.values()})
    owners = dpkg_owners(_run(["dpkg-query", "-S", *asked]))
    orphans = [p for r, p in real_files.items() if r not in owners and p not in owners]
    if orphans:
        raise HostFilesError(f"{', '.join(sorted(orphans))}: from no Debian package")
    names = sorted(set(owners.values()))
    versions = _run(["dpkg-query", "-W", "-f", "${Package} ${Version}\\n", *names])
    return dict(line.split(" ", 1) for line in versions.splitlines() if " " in line)


def host_tree(files: Sequence[str], directories: Sequence[str]) -> HostTree:
    """The entries for ``files`` and everything in ``directories`` (libraries included), and
    their packages."""
    missing = [path for path in files if not os.path.exists(path)]
    if missing:
        raise HostFilesError(f"{', '.join(missing)} missing on this machine")
    wanted = [*files, *(p for d in directories for p in _walk(d))]
    elf = [p for p in wanted if os.path.isfile(p) and not os.path.islink(p)]
    libraries = ldd_libraries(_run(["ldd", *elf])) if elf else []
    entries, real_files = _entries([*wanted, *libraries])
    return HostTree(tuple(entries[p] for p in sorted(entries)), _packages(real_files))
