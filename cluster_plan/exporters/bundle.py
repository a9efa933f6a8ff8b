"""The project's Python modules as one zip a node's python3 runs (`python3 FILE exporter gpu`).

The nodes do not have the cluster_plan package; the collectors need a few of its modules.
The monitoring role builds this zip on the controller and copies it. It is the same bytes for
the same sources (sorted entries, fixed timestamps and modes), so a re-run copies nothing.
`python -m cluster_plan.exporters.bundle FILE` writes it when it differs and prints
`changed` or `unchanged`.
"""

from __future__ import annotations

import io
import sys
import zipfile
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
ENTRY = "import sys\nfrom cluster_plan.exporters.node import main\nsys.exit(main())\n"
FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def sources(package: Path = PACKAGE) -> list[Path]:
    """Every module of the package (no caches, no data files: the collectors read none)."""
    return sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts)


def nvml_binding() -> Path | None:
    """nvidia-ml-py's single module from the controller's environment (Debian 12 does not
    package it): without it a GPU node's collector could only say NVML is down."""
    try:
        import pynvml
    except ImportError:
        return None
    path = Path(pynvml.__file__ or "")
    return path if path.suffix == ".py" and path.is_file() else None


def _entry(zf: zipfile.ZipFile, name: str, data: bytes) -> None:
    info = zipfile.ZipInfo(name, date_time=FIXED_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    zf.writestr(info, data)


def bundle(package: Path = PACKAGE) -> bytes:
    """The zip: `__main__.py`, cluster_plan/... in name order, and pynvml.py when the
    controller has it."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        _entry(zf, "__main__.py", ENTRY.encode())
        for path in sources(package):
            name = path.relative_to(package.parent).as_posix()
            _entry(zf, name, path.read_bytes())
        binding = nvml_binding()
        if binding is not None:
            _entry(zf, "pynvml.py", binding.read_bytes())
    return buffer.getvalue()


def write_bundle(target: Path, package: Path = PACKAGE) -> bool:
    """Write the zip to `target` (atomically) unless it already holds it; True if written."""
    data = bundle(package)
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
    if len(args) != 1:
        print("usage: python -m cluster_plan.exporters.bundle FILE", file=sys.stderr)
        return 2
    try:
        changed = write_bundle(Path(args[0]))
    except OSError as exc:
        print(f"cannot write {args[0]}: {exc.strerror}", file=sys.stderr)
        return 1
    print("changed" if changed else "unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
