"""The device plugin's own Go tests (`go test` in its module: registration with a fake
kubelet, ListAndWatch and health, Allocate, time-slicing, the configuration's checks), run on
a copy of the package's sources with the bundle's module and build caches
(/var/cache/cluster-plan/go, or $CLUSTER_PLAN_CACHE): go.sum must pin every module it
needs (`-mod=readonly`), and a module the cache lacks comes from GOPROXY as for the bundle."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cluster_plan.kubernetes.bundle.cache import cache_root, go_environment
from cluster_plan.kubernetes.bundle.project import DEVICE_PLUGIN_SOURCE

SOURCES = Path(__file__).resolve().parents[2] / "cluster_plan" / DEVICE_PLUGIN_SOURCE


@pytest.mark.skipif(shutil.which("go") is None, reason="Go is not installed")
def test_the_plugins_go_tests_pass_with_go_sum_as_committed(tmp_path: Path) -> None:
    module = tmp_path / "device-plugin"
    shutil.copytree(SOURCES, module)
    env = go_environment(cache_root(None))
    env["GOFLAGS"] += " -mod=readonly"  # a go.sum lacking a hash fails, not grows
    result = subprocess.run(
        ["go", "test", "-count=1", "-v", "."],
        cwd=module,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    passed = [line for line in result.stdout.splitlines() if line.startswith("--- PASS")]
    assert len(passed) >= 8, result.stdout
    assert (module / "go.sum").read_bytes() == (SOURCES / "go.sum").read_bytes()
