"""The one set of command-line options that says how a command reaches the nodes, and the
executor it builds: SSH with the user's options (Ansible's `ssh_common_args` included), the
lab's nodes, or a prefix of the user's own."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cluster_plan.cli.policy import UsageError
from cluster_plan.plan.contract import ExpandedPlan
from cluster_plan.transport.execution import Executor, PrefixExecutor
from cluster_plan.transport.lab import LabExecutor, lab_prefixes

TRANSPORTS = {
    "ssh": "root@address (real clusters)",
    "lab": "inside each lab node (nsenter, the node's own tools)",
    "lab-netns": "this machine's tools in each lab node's network namespace",
    "exec": "--exec-prefix",
}


def add_transport_options(
    parser: argparse.ArgumentParser, transports: Sequence[str] = tuple(TRANSPORTS)
) -> None:
    """How the command reaches the nodes (`executor_for` reads these); `transports` are
    those the command can use."""
    parser.add_argument(
        "--transport",
        choices=list(transports),
        default="ssh",
        help="; ".join(f"{name}: {TRANSPORTS[name]}" for name in transports),
    )
    parser.add_argument(
        "--exec-prefix",
        help="command put before each node command, {node} and {address} substituted "
        "(e.g. 'ip netns exec {node}')",
    )
    add_ssh_options(parser)


def add_ssh_options(parser: argparse.ArgumentParser, user: str | None = "root") -> None:
    """The SSH options (`SshOptions.from_args` reads these); `user` the default user, None
    where the inventory's (the plan's access) is the default."""
    parser.add_argument(
        "--ssh-option", action="append", default=[], metavar="OPT", help="ssh -o OPT"
    )
    parser.add_argument(
        "--ssh-args", default="", help="more ssh arguments, one string (Ansible's ssh_common_args)"
    )
    parser.add_argument("--ssh-key", help="identity file")
    parser.add_argument(
        "--ssh-user",
        default=user,
        help=None if user else "default: the plan's access.ansible_user, as Ansible's",
    )


@dataclass(frozen=True)
class SshOptions:
    """The user's SSH settings, from `--ssh-*`; None where the command's default holds."""

    user: str | None = None
    key: str | None = None
    options: tuple[str, ...] = ()  # each given to ssh as `-o OPT`
    args: str = ""  # more arguments, one string (Ansible's ssh_common_args)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SshOptions:
        return cls(args.ssh_user, args.ssh_key, tuple(args.ssh_option), args.ssh_args)

    def arguments(self) -> list[str]:
        """What ssh is given before USER@HOST: the `-o` options, the other arguments, the key."""
        words = [part for opt in self.options for part in ("-o", opt)]
        words += shlex.split(self.args)
        return [*words, "-i", self.key] if self.key else words


def ssh_prefix(args: argparse.Namespace, control_dir: Path) -> list[str]:
    """`ssh ... USER@{address}` with the user's options, one connection per node."""
    options = SshOptions.from_args(args).arguments()
    # One connection per node for the whole run, so a round's commands start in milliseconds.
    # The sockets live in a folder of this run only: %C hashes host, port and user, not the
    # ProxyCommand, so a shared path could reuse a master to another cluster (another lab)
    # with the same addresses. Given first, this ControlPath wins over one in --ssh-args.
    shared = ["-o", "ControlMaster=auto", "-o", "ControlPersist=10",
              "-o", f"ControlPath={control_dir}/%C"]  # fmt: skip
    return ["ssh", "-o", "BatchMode=yes", *shared, *options, f"{args.ssh_user}@{{address}}"]


def executor_for(
    args: argparse.Namespace,
    expanded: ExpandedPlan,
    addresses: dict[str, str],
    control_dir: Path,
    follow_lab: bool = False,
) -> Executor:
    """The executor the options ask for. `follow_lab`: look the lab's nodes up at each command
    (they come, go and reboot during a change) rather than once."""
    if args.transport == "lab" and follow_lab:
        return LabExecutor(expanded)
    if args.transport in ("lab", "lab-netns"):
        return PrefixExecutor(per_node=lab_prefixes(expanded, args.transport), addresses=addresses)
    if args.transport == "exec":
        if not args.exec_prefix:
            raise UsageError("--transport exec needs --exec-prefix")
        return PrefixExecutor(shlex.split(args.exec_prefix), addresses)
    return PrefixExecutor(ssh_prefix(args, control_dir), addresses, remote_shell=True)
