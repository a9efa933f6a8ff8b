"""An all-reduce sweep over message sizes, as nccl-tests' all_reduce_perf runs it: warm-up
operations, then timed ones; the time of a size is the slowest rank's mean, and each size's
result is checked (every rank's buffer holds the sum of the ranks' values)."""

from __future__ import annotations

import socket
import time
from typing import Any

from cluster_plan.collectives.comm import Communicator
from cluster_plan.collectives.sweep import figures


def iterations(op_seconds: float, target_seconds: float, most: int) -> int:
    """Timed operations for one size: about `target_seconds` of them, 2 at least, `most` at
    most (a lab link at a hundredth of its speed takes a second for 8 MiB)."""
    if op_seconds <= 0:
        return most
    return max(2, min(most, int(target_seconds / op_seconds)))


def sweep(
    comm: Communicator, sizes: list[int], most: int, warmup: int, target_seconds: float
) -> dict[str, Any]:
    rows = []
    correct = True
    for size in sizes:
        elements = size // 4
        check = comm.buffer(elements, float(comm.rank + 1))
        comm.allreduce(check)
        comm.sync()
        expected = comm.world * (comm.world + 1) / 2
        correct = correct and comm.maximum(0.0 if comm.check(check, expected) else 1.0) == 0.0
        data = comm.buffer(elements, 0.0)
        comm.barrier()
        start = time.perf_counter()
        for _ in range(warmup):
            comm.allreduce(data)
        comm.sync()
        # every rank must run the same count: the slowest rank's warm-up decides it
        op_seconds = comm.maximum((time.perf_counter() - start) / max(warmup, 1))
        count = iterations(op_seconds, target_seconds, most)
        comm.barrier()
        start = time.perf_counter()
        for _ in range(count):
            comm.allreduce(data)
        comm.sync()
        seconds = comm.maximum((time.perf_counter() - start) / count)
        rows.append({**figures(size, seconds, comm.world), "iterations": count})
    return {
        "ranks": comm.world,
        "hosts": comm.gather(socket.gethostname()),
        "correct": correct,
        "results": rows,
    }
