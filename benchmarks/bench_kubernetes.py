"""Kubernetes rendering figures (printed, never asserted): for synthetic plans of growing
size with Kubernetes as the scheduler, the time to render every object and configuration and
to write it as YAML, against the time to validate and expand the same plan (the baseline,
measured in the same run)."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plan_factory import synthetic_plan

from cluster_plan.api import load_expanded, lock_plan
from cluster_plan.kubernetes import files, render

SIZES = [int(s) for s in os.environ.get("BENCH_K8S_SIZES", "64,1024,4096").split(",")]


def kubernetes_plan(nodes: int) -> str:
    text = synthetic_plan(nodes)
    for slurm, kubernetes in (("slurm_controller", "k8s_control_plane"),
                              ("slurm_compute", "k8s_worker")):  # fmt: skip
        text = text.replace(slurm, kubernetes)
    return text.replace(
        "  type: slurm\n",
        '  type: kubernetes\n  kubernetes: {version: "1.36", node_network: compute}\n',
    )


def main() -> None:
    print(f"{'nodes':>7} {'expand s':>9} {'render s':>9} {'yaml s':>7} {'files':>6} "
          f"{'MB':>5} {'render/expand':>14}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for size in SIZES:
            plan = Path(tmp) / f"k8s{size}.yml"
            plan.write_text(kubernetes_plan(size))
            lock_plan(plan)
            start = time.perf_counter()
            expanded = load_expanded(plan)
            expand_s = time.perf_counter() - start
            start = time.perf_counter()
            rendering = render(expanded)
            render_s = time.perf_counter() - start
            start = time.perf_counter()
            texts = files(rendering)
            yaml_s = time.perf_counter() - start
            size_mb = sum(map(len, texts.values())) / 1e6
            print(f"{size:>7} {expand_s:>9.2f} {render_s:>9.2f} {yaml_s:>7.2f} {len(texts):>6} "
                  f"{size_mb:>5.1f} {render_s / expand_s:>13.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
