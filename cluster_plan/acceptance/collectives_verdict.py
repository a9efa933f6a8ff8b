"""The verdicts of collectives and training acceptance, from what the program printed: a
sweep's bus bandwidth in plan units against the pool's floor (and each node's NCCL within it),
the nodes in every slow pair, a training job's loss and weights. Pure, tested on recorded
output."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from cluster_plan.acceptance.collectives_spec import CollectivesSpec, PoolRun
from cluster_plan.transport.execution import CommandResult, last_json_object


def _tail(result: CommandResult) -> str:
    text = (result.stderr or result.stdout).strip().splitlines()
    return " | ".join(text[-3:])[:400] or f"exit {result.rc}"


def plan_rows(doc: Mapping[str, Any], rate_scale: float) -> list[dict[str, Any]]:
    """Each size's figures, bandwidths in plan units (lab links run at rate_scale)."""
    return [
        {
            "bytes": int(r["bytes"]),
            "time_us": float(r["time_us"]),
            "algbw_GBps": round(float(r["algbw_GBps"]) / rate_scale, 6),
            "busbw_GBps": round(float(r["busbw_GBps"]) / rate_scale, 6),
        }
        for r in doc.get("results") or []
    ]


@dataclass
class PoolVerdict:
    pool: PoolRun
    rows: list[dict[str, Any]] = field(default_factory=list)
    ranks: int = 0
    correct: bool = False
    error: str | None = None
    suspects: list[str] = field(default_factory=list)
    localised_by: str | None = None
    pairs: list[dict[str, Any]] = field(default_factory=list)
    retest_busbw: float | None = None  # the largest message again, alone: it decides
    intra: dict[str, Any] | None = None  # NCCL within each node (pools with GPUs)

    @property
    def busbw(self) -> float | None:
        if self.retest_busbw is not None:
            return self.retest_busbw
        return self.rows[-1]["busbw_GBps"] if self.rows else None

    @property
    def below_floor(self) -> bool:
        return self.error is None and self.busbw is not None and self.busbw < self.pool.floor_GBps

    def problems(self) -> list[str]:
        pool = self.pool
        if self.error:
            return [f"pool {pool.pool}: the all-reduce did not run: {self.error}"]
        out = []
        if not self.correct:
            out.append(f"pool {pool.pool}: an all-reduce returned a wrong sum")
        if self.busbw is not None and self.busbw < pool.floor_GBps:
            named = (f"; slow: {', '.join(self.suspects)} (by {self.localised_by})"
                     if self.suspects else "")  # fmt: skip
            out.append(
                f"pool {pool.pool}: all-reduce bus bandwidth {self.busbw:g} GB/s at "
                f"{self.rows[-1]['bytes']} bytes, below the floor {pool.floor_GBps:g} GB/s "
                f"({pool.link_gbps:g} Gb/s links){named}"
            )
        intra = self.intra or {}
        out += [
            f"pool {pool.pool}: node {n['node']}: "
            + (f"intra-node all-reduce did not run: {n['error']}" if n["error"] else
               f"intra-node all-reduce bus bandwidth {n['busbw_GBps']:g} GB/s, below the "
               f"floor {intra['floor_GBps']:g} GB/s")
            for n in intra.get("nodes") or [] if not n["passed"]
        ]  # fmt: skip
        return out

    def as_dict(self, spec: CollectivesSpec) -> dict[str, Any]:
        problems = self.problems()
        return {
            "pool": self.pool.pool,
            "partition": self.pool.partition,
            "nodes": list(self.pool.nodes),
            "backend": self.pool.backend,
            "ranks": self.ranks,
            "link_gbps": self.pool.link_gbps,
            "floor_GBps": self.pool.floor_GBps,
            "busbw_GBps": self.busbw,
            "first_busbw_GBps": self.rows[-1]["busbw_GBps"] if self.rows else None,
            "retested": self.retest_busbw is not None,
            "correct": self.correct,
            "sizes": self.rows,
            "intra_node": self.intra or _intra_node(self.pool),
            "suspects": self.suspects,
            "localised_by": self.localised_by,
            "pairs": self.pairs,
            "error": self.error,
            "problems": problems,
            "passed": not problems,
        }


def _intra_node(pool: PoolRun) -> dict[str, Any]:
    if pool.backend != "nccl":
        return {
            "measured": False,
            "floor_GBps": None,
            "reason": f"{pool.backend} on CPUs: the intra-node floor is NCCL's, on GPU nodes",
        }
    return {
        "measured": False,
        "floor_GBps": pool.intra_floor_GBps,
        "reason": "one GPU per node: nothing to all-reduce within a node",
    }


def judge_intra(pool: PoolRun, results: dict[str, PoolVerdict]) -> dict[str, Any]:
    """Each node's single-node NCCL sweep against the intra-node floor (none: reported only)."""
    floor = pool.intra_floor_GBps
    nodes = []
    for node, verdict in results.items():
        busbw = verdict.busbw
        error = verdict.error or (None if verdict.correct else "an all-reduce returned a wrong sum")
        nodes.append({
            "node": node,
            "busbw_GBps": busbw,
            "error": error,
            "passed": error is None and (floor is None or (busbw or 0.0) >= floor),
        })  # fmt: skip
    reason = None if floor is not None else "no catalog floor for this GPU model and count"
    return {"measured": True, "floor_GBps": floor, "reason": reason, "nodes": nodes}


def judge_sweep(pool: PoolRun, result: CommandResult, rate_scale: float) -> PoolVerdict:
    verdict = PoolVerdict(pool)
    doc = last_json_object(result.stdout)
    if doc is None or not doc.get("results"):
        verdict.error = _tail(result)
        return verdict
    verdict.rows = plan_rows(doc, rate_scale)
    verdict.ranks = int(doc.get("ranks") or 0)
    verdict.correct = bool(doc.get("correct")) and result.rc == 0
    return verdict


def slow_in_every_pair(pairs: Sequence[tuple[str, str, bool]]) -> list[str]:
    """The nodes every one of whose pairs was slow (and that were in at least one)."""
    nodes = sorted({n for a, b, _ in pairs for n in (a, b)})
    return [n for n in nodes if all(slow for a, b, slow in pairs if n in (a, b))]


class TrainedPool(Protocol):
    """Where a training job ran: a Slurm pool's run, or a Kubernetes plan's training class."""

    @property
    def pool(self) -> str: ...

    @property
    def nodes(self) -> tuple[str, ...]: ...


def judge_training(pool: TrainedPool, job: str, output: str, returncode: int) -> dict[str, Any]:
    doc = last_json_object(output) or {}
    problems = []
    if not doc:
        problems.append(f"pool {pool.pool}: training job {job or '?'} printed no result "
                        f"(exit {returncode}): {output.strip()[-300:]}")  # fmt: skip
    else:
        if returncode != 0:
            problems.append(f"pool {pool.pool}: training job {job or '?'} exited {returncode}: "
                            f"{output.strip()[-300:]}")  # fmt: skip
        if not doc.get("loss_went_down"):
            problems.append(f"pool {pool.pool}: the training loss did not go down "
                            f"({doc.get('first_loss')} -> {doc.get('last_loss')})")  # fmt: skip
        if not doc.get("identical_weights"):
            problems.append(f"pool {pool.pool}: the ranks ended with different weights: the "
                            "gradients were not synchronised")  # fmt: skip
    return {
        "pool": pool.pool,
        "job": job or None,
        "nodes": list(pool.nodes),
        "ranks": int(doc.get("ranks") or 0),
        "hosts": list(doc.get("hosts") or []),
        "steps": int(doc.get("steps") or 0),
        "first_loss": doc.get("first_loss"),
        "last_loss": doc.get("last_loss"),
        "losses": list(doc.get("losses") or []),
        "identical_weights": bool(doc.get("identical_weights")),
        "weights_sha256": list(doc.get("weights_sha256") or []),
        "problems": problems,
        "passed": not problems,
    }
