"""The node program, `cluster-plan-collectives` (one zip, roles/software installs it):

    allreduce --backend gloo|nccl|mpi [--init tcp://HOST:PORT] [--sizes 4096,...]
              [--network CIDR]
    train [--steps N] [--batch N] [--lr X] [--network CIDR]      (under torchrun)

Every rank runs it (srun starts one per node, or torchrun); rank 0 prints one JSON document
on stdout. Exit 0 when the result is sound (all-reduce: every size checked correct; train:
the loss went down and every rank ended with the same weights), 1 otherwise or on an error,
with the message on stderr; 2 for a usage error."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from cluster_plan.collectives.comm import (
    ProgramError,
    TorchCommunicator,
    communicator,
    use_network,
)

DEFAULT_SIZES = "4096,65536,1048576,8388608"


def _sizes(text: str) -> list[int]:
    try:
        sizes = sorted({int(s) for s in text.split(",") if s})
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of byte counts") from None
    if not sizes or sizes[0] < 4:
        raise argparse.ArgumentTypeError("sizes are byte counts of at least 4")
    return sizes


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="cluster-plan-collectives", description=__doc__)
    sub = top.add_subparsers(dest="program", required=True)
    ar = sub.add_parser("allreduce", help="an all-reduce sweep over message sizes")
    ar.add_argument("--backend", choices=["gloo", "nccl", "mpi"], default="gloo")
    ar.add_argument("--init", default="env://", help="torch's rendezvous (tcp://HOST:PORT)")
    ar.add_argument("--sizes", type=_sizes, default=_sizes(DEFAULT_SIZES))
    ar.add_argument("--iterations", type=int, default=20, help="timed operations, at most")
    ar.add_argument("--warmup", type=int, default=1)
    ar.add_argument("--seconds", type=float, default=1.0, help="timed seconds per size, about")
    ar.add_argument("--timeout-s", type=float, default=120)
    ar.add_argument("--network", help="the job network's CIDR: gloo/NCCL sockets stay on it")
    tr = sub.add_parser("train", help="a DistributedDataParallel job (under torchrun)")
    tr.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
    tr.add_argument("--steps", type=int, default=60)
    tr.add_argument("--batch", type=int, default=64)
    tr.add_argument("--lr", type=float, default=0.02)
    tr.add_argument("--timeout-s", type=float, default=120)
    tr.add_argument("--network", help="the job network's CIDR: gloo/NCCL sockets stay on it")
    return top


def run(args: argparse.Namespace) -> tuple[dict[str, Any], bool, int]:
    """(document, sound, rank)."""
    use_network(args.network)
    if args.program == "allreduce":
        from cluster_plan.collectives.allreduce import sweep

        comm = communicator(args.backend, args.init, args.timeout_s)
        doc = sweep(comm, args.sizes, args.iterations, max(args.warmup, 1), args.seconds)
        doc["backend"] = args.backend
        comm.close()
        return doc, bool(doc["correct"]), comm.rank
    from cluster_plan.collectives.training import train

    torch_comm = TorchCommunicator(args.backend, "env://", args.timeout_s)
    doc = train(torch_comm, args.steps, args.batch, args.lr)
    doc["backend"] = args.backend
    torch_comm.close()
    return doc, bool(doc["identical_weights"] and doc["loss_went_down"]), torch_comm.rank


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        doc, sound, rank = run(args)
    except ProgramError as exc:
        print(f"cluster-plan-collectives: {exc}", file=sys.stderr)
        return 1
    except (RuntimeError, ValueError) as exc:  # a rendezvous or transport that failed
        print(f"cluster-plan-collectives: {args.program}: {exc}", file=sys.stderr)
        return 1
    if rank == 0:
        print(json.dumps(doc, sort_keys=True), flush=True)
    return 0 if sound else 1


if __name__ == "__main__":
    sys.exit(main())
