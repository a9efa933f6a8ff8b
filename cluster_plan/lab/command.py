"""`cluster-plan lab ...`: argparse wiring and handlers.

Handlers return an exit status or raise; cluster_plan.cli.policy maps what they raise
(1 the lab is not fully up or a command failed on a node, 2 usage or an unreadable plan).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

from cluster_plan.cli.envelope import EnvelopeError, unwrapped
from cluster_plan.cli.policy import UsageError
from cluster_plan.lab import faults, images, lifecycle, node, state, status
from cluster_plan.lab.connection import ssh_options
from cluster_plan.lab.names import LabError, for_plan
from cluster_plan.plan.contract import ExpandedPlan, Host
from cluster_plan.plan.input_files import InputError, read_json

MAX_EXPANDED_BYTES = 1024 * 1024 * 1024  # as `acceptance --expanded` reads


def load_plan(path: str) -> ExpandedPlan:
    """The expanded plan: through cluster_plan.api, or an expanded JSON file (tests).
    Raises PlanError (the plan fails its checks) or UsageError (no plan to read)."""
    plan = Path(path)
    if not plan.is_file():
        raise UsageError(f"{path}: no such plan file")
    if plan.suffix == ".json":
        try:  # `expand --format json` output, or the expanded plan alone
            data = read_json(plan, MAX_EXPANDED_BYTES, "an expanded plan (JSON)")
            loaded = unwrapped(data, "expand")
        except EnvelopeError as err:
            raise UsageError(f"{path}: not an expanded plan: {err}") from None
        except InputError as err:  # not JSON, a NaN: the message names the key
            raise UsageError(str(err)) from None
        if not isinstance(loaded, dict):
            raise UsageError(f"{path}: not an expanded plan (a JSON object)")
        return cast(ExpandedPlan, loaded)
    from cluster_plan.api import load_expanded

    return load_expanded(path)


def register(subparsers: Any) -> None:
    lab = subparsers.add_parser("lab", help="the plan's cluster as namespaces on this machine")
    sub = lab.add_subparsers(dest="lab_command", metavar="COMMAND", required=True)

    def plan_parser(name: str, text: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = sub.add_parser(name, help=text, description=text)
        parser.add_argument("plan", metavar="PLAN", help="the cluster plan (YAML)")
        return parser

    up = plan_parser("up", "build and boot the lab (a no-op when it is up)")
    up.add_argument(
        "--image",
        choices=["packages", "bare"],
        help="what the nodes boot on, instead of the plan's lab.image: a node image with the "
        "packages the roles install, or the bare base image (docs/lab.md, Node images)",
    )
    up.set_defaults(lab_handler=_up)
    plan_parser("down", "remove everything the lab made").set_defaults(lab_handler=_down)
    st = plan_parser("status", "what is running, read from the machine")
    st.add_argument("--format", choices=["text", "json"], default="text")
    st.set_defaults(lab_handler=_status)
    ssh = plan_parser("ssh", "SSH to a node through the admin namespace")
    ssh.add_argument("node")
    # dest is not "command": that is the top-level command's ("lab"), which names the
    # command in messages and in a JSON document
    ssh.add_argument("node_command", metavar="command", nargs=argparse.REMAINDER)
    ssh.set_defaults(lab_handler=_ssh)
    run = plan_parser("run", "run a command inside node(s) without SSH")
    run.add_argument("node", help="a node name, or 'all'")
    run.add_argument("node_command", metavar="command", nargs=argparse.REMAINDER)
    run.set_defaults(lab_handler=_run)
    fault = plan_parser("fault", "inject a fault on a node's links")
    fault.add_argument("node")
    fault.add_argument("--rate", help="limit the link, e.g. 100mbit")
    fault.add_argument("--loss", help="drop this share of the frames the node sends, e.g. 2%%")
    fault.add_argument("--delay", help="delay the frames the node sends, e.g. 5ms")
    fault.add_argument("--down", action="store_true", help="take the node's link(s) down")
    fault.add_argument(
        "--freeze",
        action="store_true",
        help="hang the node: freeze its processes and drop all it sends",
    )
    fault.add_argument("--clear", action="store_true", help="remove every fault from the node")
    fault.add_argument("--net", help="only this plan network's link (default: all)")
    fault.add_argument(
        "--duration",
        type=float,
        default=0,
        help="hold the fault this many seconds, then clear it (default: until --clear or lab down)",
    )
    fault.set_defaults(lab_handler=_fault)
    restart = plan_parser("restart", "power-cycle a node (its disk survives)")
    restart.add_argument("node")
    restart.set_defaults(lab_handler=_restart)
    lab.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    """Entry point for the CLI: load the plan and run the handler (errors propagate to the
    CLI's policy)."""
    expanded = load_plan(args.plan)
    code: int = args.lab_handler(args, expanded)
    return code


def _up(args: argparse.Namespace, expanded: ExpandedPlan) -> int:
    if args.image:
        expanded = images.with_image(expanded, args.image)
    if not lifecycle.up(expanded, args.plan):
        print(f"lab {for_plan(expanded).lab}: already up, nothing to do")
    return 0


def _down(args: argparse.Namespace, expanded: ExpandedPlan) -> int:
    removed = lifecycle.down(expanded)
    print(
        f"lab {for_plan(expanded).lab}: down"
        + (f" (removed {len(removed)}: {', '.join(removed)})" if removed else " (nothing ran)")
    )
    return 0


def _status(args: argparse.Namespace, expanded: ExpandedPlan) -> int:
    report = status.collect(for_plan(expanded), expanded)
    args.reporter.result(report, lambda: status.render(report))
    return 0 if report["up"] else 1


def _host(expanded: ExpandedPlan, name: str) -> Host:
    if name not in expanded["hosts"]:
        raise LabError(f"no node {name!r} in the plan (nodes: {', '.join(expanded['hosts'])})")
    return expanded["hosts"][name]


def _ssh(args: argparse.Namespace, expanded: ExpandedPlan) -> int:
    host = _host(expanded, args.node)
    command = args.node_command[1:] if args.node_command[:1] == ["--"] else args.node_command
    argv = [
        "ssh",
        *ssh_options(expanded),
        "-i",
        str(for_plan(expanded).ssh_key),
        f"root@{host['address']}",
        *command,
    ]
    sys.stdout.flush()
    os.execvp("ssh", argv)


def _run(args: argparse.Namespace, expanded: ExpandedPlan) -> int:
    lifecycle.require_root()
    command = args.node_command[1:] if args.node_command[:1] == ["--"] else args.node_command
    if not command:
        raise LabError("no command given: lab run PLAN NODE -- COMMAND...")
    hosts = list(expanded["hosts"]) if args.node == "all" else [args.node]
    names = for_plan(expanded)
    st = state.load(names.state_file)
    failed = 0
    for host in hosts:
        _host(expanded, host)
        init = st.nodes.get(host) if st else None
        if init is None or not init.alive():
            print(f"{host}: not running", file=sys.stderr)
            failed += 1
            continue
        if len(hosts) > 1:
            print(f"--- {host}", flush=True)
        result = subprocess.run(node.nsenter(init, command), check=False)
        failed += result.returncode != 0
    return 1 if failed else 0


def _fault(args: argparse.Namespace, expanded: ExpandedPlan) -> int:
    lifecycle.require_root()
    names = for_plan(expanded)
    chosen = [args.rate, args.loss, args.delay]
    if args.clear:
        if any(chosen) or args.down or args.freeze:
            raise LabError("--clear cannot be combined with another fault")
        had = faults.clear(names, expanded, args.node)
        print(f"{args.node}: faults cleared" if had else f"{args.node}: had no fault")
        return 0
    if not any(chosen) and not args.down and not args.freeze:
        raise LabError("give a fault: --rate, --loss, --delay, --down, --freeze or --clear")
    fault = faults.Fault(
        rate_mbit=faults.parse_rate(args.rate) if args.rate else None,
        loss_pct=faults.parse_pct(args.loss) if args.loss else None,
        delay_ms=faults.parse_ms(args.delay) if args.delay else None,
        down=args.down,
        freeze=args.freeze,
    )
    faults.apply(names, expanded, args.node, fault, args.net)
    print(f"{args.node}: {fault.describe()}")
    if args.duration > 0:
        try:
            time.sleep(args.duration)
        finally:
            faults.clear(names, expanded, args.node)
            print(f"{args.node}: faults cleared after {args.duration:g}s")
    return 0


def _restart(args: argparse.Namespace, expanded: ExpandedPlan) -> int:
    _host(expanded, args.node)
    init = lifecycle.restart_node(expanded, args.node)
    print(f"{args.node}: restarted (init pid {init.pid})")
    return 0
