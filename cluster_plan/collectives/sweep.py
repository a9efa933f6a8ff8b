"""The figures of an all-reduce sweep, as NVIDIA's nccl-tests defines them
(doc/PERFORMANCE.md): algorithm bandwidth is the message size over the time one operation
takes; bus bandwidth scales it by 2(n-1)/n, the share of the data each rank's link carries in
an all-reduce, so that it can be compared with the link's speed whatever the rank count."""

from __future__ import annotations

GB = 1e9  # nccl-tests reports GB/s in powers of ten


def message_sizes(smallest: int, largest: int, factor: int = 4) -> list[int]:
    """Sizes in bytes from `smallest` to `largest`, each `factor` times the one before (the
    largest always included); multiples of 4 bytes, one float32 each."""
    if smallest <= 0 or largest < smallest or factor < 2:
        raise ValueError(f"sizes {smallest}..{largest} x{factor} are not a sweep")
    sizes = []
    size = smallest
    while size < largest:
        sizes.append(size - size % 4 or 4)
        size *= factor
    sizes.append(largest - largest % 4 or 4)
    return sorted(set(sizes))


def bus_factor(ranks: int) -> float:
    """All-reduce: each rank sends and receives 2(n-1)/n of the message."""
    if ranks < 1:
        raise ValueError("an all-reduce needs at least one rank")
    return 2 * (ranks - 1) / ranks


def _significant(value: float, digits: int = 6) -> float:
    """Six significant digits: lab links run at a hundredth of a GB/s."""
    return float(f"{value:.{digits}g}")


def figures(size: int, seconds: float, ranks: int) -> dict[str, float | int]:
    """One size's row: bytes, microseconds per operation, algbw and busbw in GB/s."""
    algbw = size / seconds / GB if seconds > 0 else 0.0
    return {
        "bytes": size,
        "time_us": round(seconds * 1e6, 1),
        "algbw_GBps": _significant(algbw),
        "busbw_GBps": _significant(algbw * bus_factor(ranks)),
    }
