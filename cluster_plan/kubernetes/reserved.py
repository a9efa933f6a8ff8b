"""What a kubelet keeps back for the node's own daemons (`kubeReserved`), by node size.

The tiers are the ones GKE publishes for its nodes ("Node allocatable resources"); they hold
back a larger share of small nodes, where the kubelet and runtime weigh more:
- memory: 25% of the first 4 GiB, 20% of the next 4, 10% of the next 8, 6% of the next 112,
  2% of the rest;
- CPU: 6% of the first core, 1% of the next, 0.5% of the next 2, 0.25% of the rest.
`systemReserved` adds a fixed floor for sshd, journald and the like.
"""

from __future__ import annotations

from collections.abc import Sequence

MEMORY_TIERS_MIB: Sequence[tuple[float, float]] = (
    (4 * 1024, 0.25),
    (4 * 1024, 0.20),
    (8 * 1024, 0.10),
    (112 * 1024, 0.06),
    (float("inf"), 0.02),
)
CPU_TIERS_MILLI: Sequence[tuple[float, float]] = (
    (1000, 0.06),
    (1000, 0.01),
    (2000, 0.005),
    (float("inf"), 0.0025),
)
SYSTEM_RESERVED = {"cpu": "100m", "memory": "256Mi"}
EVICTION_HARD_MEMORY = "100Mi"


def _tiered(amount: float, tiers: Sequence[tuple[float, float]]) -> int:
    total, left = 0.0, amount
    for size, share in tiers:
        step = min(left, size)
        total += step * share
        left -= step
        if left <= 0:
            break
    return int(total)


def kube_reserved(cpu_cores: float, memory_gib: float) -> dict[str, str]:
    """`kubeReserved` for a node of this size, in millicores and MiB (rounded down)."""
    if cpu_cores <= 0 or memory_gib <= 0:
        raise ValueError(f"a node needs CPUs and memory, not {cpu_cores} cores, {memory_gib} GiB")
    cpu = _tiered(cpu_cores * 1000, CPU_TIERS_MILLI)
    memory = _tiered(memory_gib * 1024, MEMORY_TIERS_MIB)
    return {"cpu": f"{cpu}m", "memory": f"{memory}Mi"}
