"""The collectors' command on a node: `cluster-plan-exporter gpu|slurm|state ...`.

The monitoring role installs the project's modules on the nodes that run a collector as one
zip (cluster_plan.node_bundle, program exporter) whose entry point is this: only the exporter
commands, so a node needs the distribution's python3 and prometheus-client, not the whole CLI's
dependencies (jsonschema, ansible). Exit statuses are the CLI's (docs/monitoring-exporters.md).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from cluster_plan.cli.policy import run
from cluster_plan.exporters.command import register


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="cluster-plan-exporter", description="Run one cluster-plan collector once."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    register(sub)
    # `exporter gpu ...` as the full CLI spells it, so the same arguments work in both
    args = parser.parse_args(argv)
    return run(args.func, args)


if __name__ == "__main__":
    sys.exit(main())
