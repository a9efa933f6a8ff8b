"""The collectors' zip (`python3 FILE exporter gpu` on a node), as the monitoring role builds
it: `python -m cluster_plan.exporters.bundle FILE` is `python -m cluster_plan.node_bundle
exporter FILE` (the builder, shared with the backup program, is cluster_plan.node_bundle).
"""

from __future__ import annotations

import sys
from pathlib import Path

from cluster_plan import node_bundle

PACKAGE = node_bundle.PACKAGE


def bundle(package: Path = PACKAGE) -> bytes:
    """The zip: `__main__.py`, cluster_plan/... in name order, and pynvml.py when the
    controller has it."""
    return node_bundle.bundle("exporter", package)


def write_bundle(target: Path, package: Path = PACKAGE) -> bool:
    """Write the zip to `target` (atomically) unless it already holds it; True if written."""
    return node_bundle.write_bundle("exporter", target, package)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m cluster_plan.exporters.bundle FILE", file=sys.stderr)
        return 2
    return node_bundle.main(["exporter", *args])


if __name__ == "__main__":
    sys.exit(main())
