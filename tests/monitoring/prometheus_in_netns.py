"""Run inside a private network namespace (`unshare -n`, loopback up): start the real
Prometheus on 127.0.0.1 with the given configuration and TSDB, wait until its rules have
evaluated and its targets have been tried, ask it every query of a JSON list at one time and
the status page's answers, write them as JSON, and stop it.

    python prometheus_in_netns.py CONFIG_DIR DATA_DIR QUERIES.json AT OUT.json

and `cluster-plan monitoring status --url` against it, to OUT.json.html (its answers to
OUT.json.cli.json).

The scrape targets are the plan's lab addresses: in an empty namespace the connection fails at
once (network unreachable), so they read as down and no packet leaves this namespace."""

from __future__ import annotations

import ctypes
import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from cluster_plan.cli.app import main as cli
from cluster_plan.monitoring.status import fetch_answers

BASE = "http://127.0.0.1:9090"
WAIT_S = 60


def get(path: str) -> Any:
    with urllib.request.urlopen(BASE + path, timeout=10) as reply:
        return json.load(reply)


def settled() -> bool:
    """A rule has fired and every target has been scraped once."""
    try:
        alerts = get("/api/v1/alerts")["data"]["alerts"]
        targets = get("/api/v1/targets?state=active")["data"]["activeTargets"]
    except (urllib.error.URLError, OSError):
        return False
    firing = any(a["state"] == "firing" for a in alerts)
    return firing and bool(targets) and all(t["health"] != "unknown" for t in targets)


def die_with_parent() -> None:
    """In the child: SIGTERM when this script dies (killed by the test's timeout), so no
    Prometheus outlives the test (prctl PR_SET_PDEATHSIG)."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


def main(config_dir: str, data_dir: str, queries_file: str, at: str, out: str) -> int:
    log = open(out + ".log", "w")  # noqa: SIM115 (open for the child's life)
    prometheus = subprocess.Popen(
        [
            "prometheus",
            "--config.file=prometheus.yml",
            f"--storage.tsdb.path={data_dir}",
            "--storage.tsdb.retention.time=30d",
            "--web.listen-address=127.0.0.1:9090",
        ],
        cwd=config_dir,
        stdout=log,
        stderr=subprocess.STDOUT,
        preexec_fn=die_with_parent,
    )
    try:
        deadline = time.monotonic() + WAIT_S
        while not settled():
            if prometheus.poll() is not None or time.monotonic() > deadline:
                print("prometheus did not settle; its log:", out + ".log", file=sys.stderr)
                return 1
            time.sleep(0.5)
        queries = json.loads(Path(queries_file).read_text())
        results = {}
        for expr in queries:
            params = urllib.parse.urlencode({"query": expr, "time": at})
            results[expr] = get("/api/v1/query?" + params)
        # the status page's queries at the series' time; its alerts and targets are now's
        answers = fetch_answers(BASE, at=float(at))
        Path(out).write_text(json.dumps({"queries": results, "status": answers}, indent=1))
        # the command a person runs, asking the server itself
        page = ["monitoring", "status", "--url", BASE, "-o", out + ".html"]
        return cli([*page, "--save-json", out + ".cli.json"])
    finally:
        prometheus.terminate()
        prometheus.wait(timeout=30)
        log.close()


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
