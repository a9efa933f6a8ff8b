"""The project's programs that run on nodes, each as one zip a node's python3 runs
(`python3 FILE ARGS...`): the collectors (`exporter`), the backup program (`backup`) and the
collectives and training program (`collectives`).

The nodes do not have the cluster_plan package. A role builds the zip of its program on the
controller and copies it. It is the same bytes for the same sources (sorted entries, fixed
timestamps and modes), so a re-run copies nothing. `python -m cluster_plan.node_bundle
PROGRAM FILE` writes it when it differs and prints `changed` or `unchanged`.
"""

from __future__ import annotations

import io
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def nvml_binding() -> list[tuple[str, bytes]]:
    """nvidia-ml-py's single module from the controller's environment (Debian 12 does not
    package it): without it a GPU node's collector could only say NVML is down."""
    try:
        import pynvml
    except ImportError:
        return []
    path = Path(pynvml.__file__ or "")
    return [("pynvml.py", path.read_bytes())] if path.suffix == ".py" and path.is_file() else []


def _nothing() -> list[tuple[str, bytes]]:
    return []


@dataclass(frozen=True)
class NodeProgram:
    entry: str  # the module whose main() the zip runs
    parts: tuple[str, ...]  # the package's subpackages it needs; () is the whole package
    extras: Callable[[], list[tuple[str, bytes]]] = _nothing  # (name, bytes) beside it


PROGRAMS = {
    # the collectors use the CLI's exit policy and shared helpers: the whole package
    "exporter": NodeProgram("cluster_plan.exporters.node", (), nvml_binding),
    # standard library only, and nothing of the package outside cluster_plan.backup
    "backup": NodeProgram("cluster_plan.backup.program", ("backup",)),
    # standard library at import; torch or mpi4py from the node's software environment
    "collectives": NodeProgram("cluster_plan.collectives.program", ("collectives",)),
}


def sources(package: Path = PACKAGE, parts: tuple[str, ...] = ()) -> list[Path]:
    """The package's modules a program needs (no caches, no data files): the package's own
    __init__.py and every module under `parts`, or all of them."""
    found = [p for p in package.rglob("*.py") if "__pycache__" not in p.parts]
    if parts:
        wanted = [package / part for part in parts]
        found = [p for p in found if p == package / "__init__.py"
                 or any(p.is_relative_to(w) for w in wanted)]  # fmt: skip
    return sorted(found)


def _entry(zf: zipfile.ZipFile, name: str, data: bytes) -> None:
    info = zipfile.ZipInfo(name, date_time=FIXED_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    zf.writestr(info, data)


def bundle(program: str, package: Path = PACKAGE) -> bytes:
    """The zip: `__main__.py`, cluster_plan/... in name order, then the program's extras."""
    spec = PROGRAMS[program]
    main = f"import sys\nfrom {spec.entry} import main\nsys.exit(main())\n"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        _entry(zf, "__main__.py", main.encode())
        for path in sources(package, spec.parts):
            _entry(zf, path.relative_to(package.parent).as_posix(), path.read_bytes())
        for name, data in spec.extras():
            _entry(zf, name, data)
    return buffer.getvalue()


def write_bundle(program: str, target: Path, package: Path = PACKAGE) -> bool:
    """Write the zip to `target` (atomically) unless it already holds it; True if written."""
    data = bundle(program, package)
    if target.is_file() and target.read_bytes() == data:
        return False
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = target.with_name(f".{target.name}.tmp")
    partial.write_bytes(data)
    partial.chmod(0o644)
    partial.replace(target)
    return True


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] not in PROGRAMS:
        names = "|".join(sorted(PROGRAMS))
        print(f"usage: python -m cluster_plan.node_bundle {names} FILE", file=sys.stderr)
        return 2
    try:
        changed = write_bundle(args[0], Path(args[1]))
    except OSError as exc:
        print(f"cannot write {args[1]}: {exc.strerror}", file=sys.stderr)
        return 1
    print("changed" if changed else "unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
