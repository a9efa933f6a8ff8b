"""`cluster-plan`: the command line (cluster_plan.cli.app).

Kept light: parts that only need the exit policy (cluster_plan.cli.policy), such as the lab,
import it without loading every subcommand.
"""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    from cluster_plan.cli.app import main as run_main

    return run_main(argv)
