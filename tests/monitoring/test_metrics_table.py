"""One metrics table (cluster_plan.monitoring.metrics): every family a collector writes is
one of its entries with its type, help and labels, and every metric the rules, the dashboards
and the status page ask for is in it; docs/METRICS.md is generated from it and is current."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cluster_plan import reference_docs
from cluster_plan.api import load_expanded
from cluster_plan.exporters.clock import Tracking, clock_families
from cluster_plan.exporters.gpu import GpuReading, NvmlReading, gpu_families
from cluster_plan.exporters.kubernetes import Node, kubernetes_families
from cluster_plan.exporters.slurm import slurm_families
from cluster_plan.exporters.state import Document, state_families
from cluster_plan.exporters.textfile import exposition, status_text
from cluster_plan.monitoring.dashboards import dashboards
from cluster_plan.monitoring.grafana import panel_exprs
from cluster_plan.monitoring.metrics import BY_NAME, COLLECTORS, EXTERNAL, METRICS, of_source
from cluster_plan.monitoring.rules import alert_rules
from cluster_plan.monitoring.status import STATUS_QUERIES

ROOT = Path(__file__).resolve().parents[2]
PLANS = sorted((ROOT / "inventory").rglob("*.yml"))
# A metric's name in PromQL: an identifier not followed by "(" (a function) nor inside quotes.
NAME = re.compile(r"\b[a-zA-Z_:][a-zA-Z0-9_:]*\b(?!\s*\()")
PROMQL_WORDS = {"by", "without", "on", "group_left", "group_right", "bool", "offset", "or",
                "and", "unless", "ignoring", "inf", "nan", "e9", "h", "m", "s"}  # fmt: skip


def every_family_text() -> dict[str, str]:
    """Each collector's exposition, with every family it can write filled."""
    gpu = GpuReading(
        index=0, uuid="GPU-0", temperature_c=40, power_mw=1e5, power_limit_mw=7e5,
        sm_clock_mhz=1500, throttle=0x8, ecc={("volatile", "uncorrected"): 1},
        remapped={"pending": 0}, nvlink_errors={(0, "replay"): 2},
    )  # fmt: skip
    xids = {"GPU-0": {"gpu": 0, "last": 79, "counts": {"79": 1}}}
    drift = Document({"findings": []}, 0.0)
    tracking = Tracking(0x0A000001, 3, 0.001, 0.002, 0.001, "Normal")
    return {
        "gpu": exposition(gpu_families("gpu01", 1, NvmlReading(up=True, gpus=[gpu]), xids)),
        "slurm": exposition(
            slurm_families(
                [("gpu01", "gpu", "idle")], {"gpu01": (8, 1)}, Counter({("gpu", "ml"): 2}), True
            )
        ),
        "kubernetes": exposition(
            kubernetes_families(
                True,
                0.01,
                [Node("gpu01", "true", False, "v1.36.3", {"nvidia.com/gpu": 2})],
                {"gpu01": {"nvidia.com/gpu": 1}},
            )
        ),
        "state": exposition(state_families((1.0, True), {"gpu01": (1.0, True)}, drift)),
        "clock": exposition(clock_families(tracking)),
        "textfile": status_text("gpu", True),
    }


def test_every_collector_writes_its_table_entries_with_their_type_help_and_labels() -> None:
    for collector, text in every_family_text().items():
        written = {}
        for family in text_string_to_metric_families(text):
            sample_names = {s.name for s in family.samples}
            (name,) = sample_names  # one series name per family: no _created beside it
            labels = {key for s in family.samples for key in s.labels}
            written[name] = (family.type, family.documentation, labels)
        expected = {
            m.name: (m.type, m.help, set(m.labels)) for m in of_source(collector)
        }  # fmt: skip
        assert written == expected, collector


def test_the_table_is_consistent() -> None:
    names = [m.name for m in METRICS]
    assert len(names) == len(set(names))
    assert {m.source for m in METRICS} == set(COLLECTORS) | set(EXTERNAL)
    for metric in METRICS:
        assert metric.name.endswith("_total") == (metric.type == "counter"), metric.name
        assert metric.help.strip(), metric.name
        ours = metric.source in COLLECTORS
        assert metric.name.startswith("cluster_plan_") == ours, metric.name


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (label matchers and strings left out)."""
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings
    bare = re.sub(r"\{[^}]*\}", "", bare)  # label matchers
    bare = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", bare)
    bare = re.sub(r"\b\d+(?:\.\d+)?(?:e\d+)?[smhd]?\b", "", bare)  # numbers and durations
    return {n for n in NAME.findall(bare) if n not in PROMQL_WORDS}


def test_the_name_finder_sees_the_metrics_of_an_expression() -> None:
    expr = (
        'sum by (node, reason) (cluster_plan_gpu_throttle{reason=~"hw_slowdown"}) * on (node) '
        'group_left () (max by (node) (up{job="node"}) * 0 + 1) > 1e9 or time() - x_total > 5m'
    )
    assert metric_names(expr) == {"cluster_plan_gpu_throttle", "up", "x_total"}


@pytest.mark.parametrize("plan", PLANS, ids=[p.stem for p in PLANS])
def test_every_metric_the_rules_and_dashboards_read_is_in_the_table(plan: Path) -> None:
    expanded = load_expanded(plan)
    if expanded["monitoring"] is None:
        pytest.skip("the plan has no monitoring")
    exprs = [r["expr"] for g in alert_rules(expanded)["groups"] for r in g["rules"]]
    exprs += [e for board in dashboards(expanded).values() for _, e in panel_exprs(board)]
    read = set().union(*(metric_names(e) for e in exprs))
    assert read and read <= set(BY_NAME), read - set(BY_NAME)


def test_every_metric_the_status_page_asks_is_in_the_table() -> None:
    read = set().union(*(metric_names(e) for e in STATUS_QUERIES.values()))
    assert read and read <= set(BY_NAME), read - set(BY_NAME)


def test_the_metrics_page_is_generated_from_the_table_and_current() -> None:
    page = (ROOT / "docs" / "METRICS.md").read_text()
    assert page == reference_docs.metrics_page()
    for metric in METRICS:
        assert f"| `{metric.name}` | {metric.type} |" in page
    assert reference_docs.stale_pages() == []


def test_the_check_names_a_stale_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "docs").mkdir()
    assert reference_docs.main(["--check", "--root", str(tmp_path)]) == 1
    assert "docs/METRICS.md: not current" in capsys.readouterr().err
    assert reference_docs.main(["--root", str(tmp_path)]) == 0
    assert reference_docs.main(["--check", "--root", str(tmp_path)]) == 0
    page = tmp_path / "docs" / "METRICS.md"
    page.write_text(page.read_text().replace("counter", "gauge", 1))
    assert reference_docs.stale_pages(tmp_path) == [page]
