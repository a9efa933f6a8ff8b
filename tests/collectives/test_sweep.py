"""The all-reduce figures (nccl-tests' definitions) and the sweep's logic, with a stand-in for
the ranks: the real backends run on the lab's nodes (tests/roles/test_software_lab.py)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from cluster_plan.collectives import allreduce
from cluster_plan.collectives.comm import rank_env
from cluster_plan.collectives.sweep import bus_factor, figures, message_sizes
from cluster_plan.node_bundle import bundle


def test_bus_bandwidth_is_algbw_times_2_n_minus_1_over_n() -> None:
    assert bus_factor(1) == 0.0
    assert bus_factor(2) == 1.0
    assert bus_factor(8) == pytest.approx(1.75)
    row = figures(8 << 20, 0.5, 4)  # 8 MiB in half a second on 4 ranks
    assert row["algbw_GBps"] == pytest.approx((8 << 20) / 0.5 / 1e9, rel=1e-5)
    assert row["busbw_GBps"] == pytest.approx(row["algbw_GBps"] * 1.5, rel=1e-5)
    assert row["time_us"] == 500000.0


def test_message_sizes_grow_by_the_factor_and_end_at_the_largest() -> None:
    assert message_sizes(4096, 1 << 20) == [4096, 16384, 65536, 262144, 1048576]
    assert message_sizes(4096, 100000)[-1] == 100000
    assert message_sizes(6, 6) == [4]  # whole float32s
    with pytest.raises(ValueError, match="not a sweep"):
        message_sizes(10, 5)


def test_slow_operations_get_fewer_iterations_but_at_least_two() -> None:
    assert allreduce.iterations(0.001, 1.0, 20) == 20
    assert allreduce.iterations(0.1, 1.0, 20) == 10
    assert allreduce.iterations(0.7, 1.0, 20) == 2
    assert allreduce.iterations(0.0, 1.0, 20) == 20


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"}, (3, 4, 1)),
        ({"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0"}, (1, 2, 0)),
        ({}, (0, 1, 0)),
    ],
)
def test_ranks_come_from_torchrun_else_srun(env: dict[str, str], expected: tuple[int, ...]) -> None:
    assert rank_env(env) == expected


class Ranks:
    """Two ranks in one process: an all-reduce doubles the buffer (both hold the same)."""

    rank = 0
    world = 2

    def __init__(self, wrong: bool = False) -> None:
        self.wrong = wrong
        self.operations = 0

    def buffer(self, elements: int, value: float) -> list[float]:
        return [value] * elements

    def allreduce(self, buffer: list[float]) -> None:
        self.operations += 1
        # rank 0 holds 1, rank 1 would hold 2: the sum is 3
        buffer[:] = [3.0 if v == 1.0 and not self.wrong else v * 2 for v in buffer]

    def check(self, buffer: list[float], expected: float) -> bool:
        return all(v == expected for v in buffer)

    def sync(self) -> None:
        return None

    def barrier(self) -> None:
        return None

    def maximum(self, value: float) -> float:
        return value

    def gather(self, value: Any) -> list[Any]:
        return [value, value]

    def close(self) -> None:
        return None


def test_a_sweep_reports_each_size_and_checks_the_sums() -> None:
    ranks = Ranks()
    doc = allreduce.sweep(ranks, [16, 64], most=3, warmup=1, target_seconds=1.0)
    assert doc["correct"] is True and doc["ranks"] == 2
    assert [r["bytes"] for r in doc["results"]] == [16, 64]
    assert all(r["iterations"] == 3 and r["busbw_GBps"] == r["algbw_GBps"] for r in doc["results"])
    assert ranks.operations == 2 * (1 + 1 + 3)  # check, warm-up, timed per size
    assert allreduce.sweep(Ranks(wrong=True), [16], 2, 1, 1.0)["correct"] is False


def test_the_zip_runs_with_the_standard_library_only_and_says_what_is_missing(
    tmp_path: Path,
) -> None:
    program = tmp_path / "cluster-plan-collectives.pyz"
    program.write_bytes(bundle("collectives"))
    names = zipfile.ZipFile(program).namelist()
    assert "cluster_plan/collectives/program.py" in names
    assert not [n for n in names if n.startswith("cluster_plan/") and "/collectives/" not in n
                and n != "cluster_plan/__init__.py"]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(program), "allreduce", "--backend", "gloo"],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert "torch is not installed here" in done.stderr and "Traceback" not in done.stderr
    usage = subprocess.run(
        [sys.executable, "-I", "-S", str(program), "allreduce", "--sizes", "0"],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert usage.returncode == 2 and "at least 4" in usage.stderr
