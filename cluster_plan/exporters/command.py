"""`cluster-plan exporter gpu|slurm|kubernetes|state|clock --textfile-dir DIR`: run one collector
once and write its node_exporter textfile (docs/monitoring-exporters.md). Exit 0 when the
collector ran cleanly, 1 when it failed (its previous metrics removed, collector_success 0
written, the reason on stderr), 2 on usage errors."""

from __future__ import annotations

import argparse
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cluster_plan.cli.policy import CheckFailed, Exit, UsageError


def register(subparsers: Any) -> None:
    """Add `exporter` (with gpu, slurm, kubernetes, state and clock) to the CLI's subparsers."""
    exporter = subparsers.add_parser(
        "exporter",
        help="write node_exporter textfile metrics (docs/monitoring-exporters.md)",
        description="Run one collector once and replace its *.prom file in the textfile "
        "directory; run it from a timer.",
    )
    kinds = exporter.add_subparsers(dest="collector", required=True, metavar="COLLECTOR")
    gpu = _collector(kinds, "gpu", "GPUs through NVML")
    gpu.add_argument("--node", default=socket.gethostname().split(".")[0])
    gpu.add_argument("--expected", type=int, help="GPUs the plan gives this node")
    gpu.add_argument(
        "--xid-wait-ms", type=int, default=1000, help="how long to listen for XID events"
    )
    gpu.add_argument(
        "--state-file",
        type=Path,
        help="XID counts kept between runs (default: DIR/.cluster_plan_gpu_xid.json)",
    )
    _collector(kinds, "slurm", "Slurm, on the controller")
    kubernetes = _collector(kinds, "kubernetes", "Kubernetes' API server, on a control plane")
    kubernetes.add_argument(
        "--kubeconfig",
        type=Path,
        default=Path("/etc/kubernetes/admin.conf"),
        help="the kubeconfig kubectl reads the API server with (default: kubeadm's admin's)",
    )
    state = _collector(kinds, "state", "acceptance, backups and drift")
    state.add_argument("--history", type=Path, help="the acceptance history (SQLite)")
    state.add_argument("--cluster", help="the cluster's name in the history")
    state.add_argument("--backup-status", type=Path, help="saved backup status JSON")
    state.add_argument("--drift", type=Path, help="saved drift JSON")
    state.add_argument(
        "--plan", type=Path, help="run backup status / drift on this plan when not saved"
    )
    _collector(kinds, "clock", "chronyd's time source, on every host")


def _collector(kinds: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = kinds.add_parser(name, help=help_text)
    parser.add_argument("--textfile-dir", type=Path, required=True)
    parser.set_defaults(func=exporter_command)
    return parser


def exporter_command(args: argparse.Namespace) -> Exit:
    from cluster_plan.exporters.textfile import CollectorError, run_collector

    collect = {
        "gpu": _gpu,
        "slurm": _slurm,
        "kubernetes": _kubernetes,
        "state": _state,
        "clock": _clock,
    }[args.collector](args)
    try:
        failure = run_collector(args.textfile_dir, args.collector, collect)
    except CollectorError as exc:  # no textfile directory: nothing can be written
        raise UsageError(str(exc)) from None
    if failure:
        raise CheckFailed(f"{args.collector} collector: {failure}")
    return Exit.OK


def _gpu(args: argparse.Namespace) -> Callable[[], list[Any]]:
    from cluster_plan.exporters.gpu import collect_gpu, import_nvml

    state = args.state_file or args.textfile_dir / ".cluster_plan_gpu_xid.json"
    return lambda: collect_gpu(args.node, args.expected, state, import_nvml(), args.xid_wait_ms)


def _slurm(args: argparse.Namespace) -> Callable[[], list[Any]]:
    from cluster_plan.exporters.slurm import collect_slurm

    return collect_slurm


def _kubernetes(args: argparse.Namespace) -> Callable[[], list[Any]]:
    from cluster_plan.exporters.kubernetes import collect_kubernetes

    return lambda: collect_kubernetes(args.kubeconfig)


def _clock(args: argparse.Namespace) -> Callable[[], list[Any]]:
    from cluster_plan.exporters.clock import collect_clock

    return collect_clock


def _state(args: argparse.Namespace) -> Callable[[], list[Any]]:
    from cluster_plan.exporters.state import collect_state

    if (args.history is None) != (args.cluster is None):
        raise UsageError("--history and --cluster go together")
    return lambda: collect_state(
        args.history, args.cluster, args.backup_status, args.drift, args.plan
    )
