"""`cluster-plan`: the command line.

Exit 0 ok, 1 a check failed, 2 usage or unreadable input, 3 a destructive change not
confirmed, 130 interrupted (cluster_plan.cli.policy).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any

from cluster_plan.cli import plan_commands
from cluster_plan.cli.policy import Exit, UsageError, run
from cluster_plan.cli.reporters import reporter_for

# Subcommands that live beside the parts they drive; each module has register(subparsers).
EXTENSIONS = (
    ("lab", "cluster_plan.lab.command"),
    ("report", "cluster_plan.acceptance.command"),
    ("k8s", "cluster_plan.kubernetes.command"),
    ("monitoring", "cluster_plan.monitoring.command"),
    ("drift", "cluster_plan.day2.drift.command"),
    ("backup", "cluster_plan.backup.command"),
    ("usage", "cluster_plan.day2.usage.command"),
    ("change", "cluster_plan.day2.change.command"),
    ("exporter", "cluster_plan.exporters.command"),
)


# Where each command's own subcommand lands (its add_subparsers(dest=...)).
SUBCOMMAND_DESTS = (
    "action",
    "lab_command",
    "k8s_command",
    "monitoring_command",
    "collector",
    "acceptance_command",
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # usage errors exit 2, as argparse does, with a hint
        self.print_usage(sys.stderr)
        self.exit(Exit.USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="cluster-plan",
        description="Describe a GPU cluster once; validate, allocate, expand, provision and "
        "verify it.",
    )
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Parser
    )
    plan_commands.register(sub)
    for command, module in EXTENSIONS:
        try:
            importlib.import_module(module).register(sub)
        except ImportError as exc:
            # The plan commands must keep working even when an optional part cannot load.
            broken = sub.add_parser(command, help=f"(unavailable: {exc})")
            broken.add_argument("rest", nargs=argparse.REMAINDER)
            broken.set_defaults(func=_unavailable(command, exc))
    return parser


def _unavailable(command: str, exc: ImportError) -> Any:
    def handler(_args: argparse.Namespace) -> Exit:
        raise UsageError(f"cluster-plan {command} is unavailable: {exc}")

    return handler


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except KeyboardInterrupt:
        return int(Exit.INTERRUPTED)
    args.reporter = reporter_for(getattr(args, "format", None), command_name(args))
    return run(args.func, args)


def command_name(args: argparse.Namespace) -> str:
    """The command as typed, without its arguments: "validate", "backup status", "acceptance
    history" (the name in a JSON document's `command`)."""
    words = [args.command]
    words += [w for dest in SUBCOMMAND_DESTS if (w := getattr(args, dest, None))]
    return " ".join(words)


if __name__ == "__main__":
    sys.exit(main())
