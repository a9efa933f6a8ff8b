"""`cluster-plan report` on reports a user hands it: figures left null, a report named like its
HTML, a `passed` flag that its findings contradict. Never a crash, never its input overwritten,
always its own judgement."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.cli_output import envelope, result
from test_acceptance_report import make_report

from cluster_plan.acceptance.html import render_html
from cluster_plan.acceptance.report import validate_report, write_report
from cluster_plan.cli import main
from cluster_plan.output_files import OutputError

FIGURES = {
    "bandwidth": ("gbps", "forward_gbps", "reverse_gbps", "measured_bps", "retransmits"),
    "probes": ("loss_pct", "loss_upper_bound_pct", "rtt_median_ms", "rtt_p99_ms"),
}


def _nulled(report: dict[str, Any]) -> dict[str, Any]:
    """Every figure the schema lets be null, null, in every row (statuses kept)."""
    for section, keys in FIGURES.items():
        for row in report[section]:
            row.update(dict.fromkeys(keys))
    return report


def test_null_figures_render(tmp_path: Path, expanded_lab: dict[str, Any],
                             capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    report = _nulled(make_report(expanded_lab))
    assert validate_report(report) == []  # schema-valid: the renderer must take it
    page = render_html(report)
    assert "n/a" in page
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report))
    assert main(["report", str(path)]) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_storage_figures_left_null_render(expanded_lab: dict[str, Any]) -> None:
    report = make_report(expanded_lab)
    run = {"mb_s": 10.0, "iops": None, "latency_s": None, "error": None}
    report["storage"] = {
        "host": "stor01", "passed": True, "health": "HEALTH_OK", "health_checks": [],
        "osds": {"up": 3, "in": 3, "total": 3, "planned": 3},
        "pgs": {"active_clean": 32, "total": 32},
        "bench": {"seconds": 5, "threads": 4, "object_size": 4 * 2**20, "pool": "bench",
                  "write": run, "read": dict(run)},
        "problems": [],
    }  # fmt: skip
    assert "10 MB/s, n/a IOPS, n/a s mean latency" in render_html(report)


@pytest.mark.parametrize("output", [None, "r.html", "./r.html"])
def test_report_never_overwrites_its_input(tmp_path: Path, expanded_lab: dict[str, Any],
                                           capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch,
                                           output: str | None) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "r.html"  # a report saved under the HTML's name
    text = json.dumps(make_report(expanded_lab))
    path.write_text(text)
    argv = ["report", str(path), *(["--output", output] if output else []), "--format", "json"]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert "is the report itself" in err and "--output" in err
    assert envelope(out)["status"] == "error"
    assert path.read_text() == text


def test_report_judges_from_its_findings_not_the_flag(
    tmp_path: Path, expanded_lab: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    failed = make_report(expanded_lab, stor02={"loss": 0.05})
    assert failed["passed"] is False
    failed["passed"] = True  # edited, or written by something else
    json_path, _ = write_report(failed, tmp_path / "bad")
    assert main(["report", str(json_path), "--format", "json"]) == 1
    out, err = capsys.readouterr()
    assert result(out)["passed"] is False
    assert "passed=true" in err and "judged by the findings" in err
    assert "FAILED" in json_path.with_suffix(".html").read_text()
    good = make_report(expanded_lab)
    good["passed"] = False
    json_path, _ = write_report(good, tmp_path / "good")
    assert main(["report", str(json_path)]) == 0
    assert "judged by the findings" in capsys.readouterr().err
    assert main(["report", str(json_path), "--format", "json"]) == 0
    document = envelope(capsys.readouterr().out)
    assert (document["command"], document["status"], document["result"]["passed"]) == (
        "report",
        "ok",
        True,
    )


def test_report_replaces_only_a_page_it_wrote(
    tmp_path: Path, expanded_lab: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "acceptance.json"
    path.write_text(json.dumps(make_report(expanded_lab)))
    mine = tmp_path / "index.html"
    mine.write_text("<html>our wiki page</html>\n")
    assert main(["report", str(path), "--output", str(mine)]) == 2
    err = capsys.readouterr().err
    assert f"{mine}: a file that `cluster-plan report` did not write" in err
    assert mine.read_text() == "<html>our wiki page</html>\n"
    assert main(["report", str(path)]) == 0  # beside RESULTS: acceptance.html, new
    assert main(["report", str(path)]) == 0  # and again, over its own page
    assert 'content="cluster-plan acceptance report"' in (tmp_path / "acceptance.html").read_text()


def test_acceptance_refuses_a_foreign_report_file_before_it_measures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "reports"
    out.mkdir()
    (out / "acceptance.json").write_text('{"our": "inventory"}\n')
    lab = Path(__file__).resolve().parents[2] / "inventory" / "lab" / "cluster.yml"
    argv = ["acceptance", str(lab), "--output-dir", str(out), "--transport", "exec",
            "--exec-prefix", "false", "--no-history"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{out / 'acceptance.json'}: a file that `cluster-plan acceptance` did not write" in err
    assert (out / "acceptance.json").read_text() == '{"our": "inventory"}\n'
    assert sorted(p.name for p in out.iterdir()) == ["acceptance.json"]


def test_a_report_with_a_number_json_cannot_hold_is_refused(
    tmp_path: Path, expanded_lab: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    report = make_report(expanded_lab)
    text = json.dumps(report).replace('"gbps": ', '"gbps": NaN, "was": ', 1)
    path = tmp_path / "acceptance.json"
    path.write_text(text)
    assert main(["report", str(path), "--format", "json"]) == 2
    out, err = capsys.readouterr()
    assert "$.bandwidth[0].gbps is NaN: a number must be finite" in err
    assert envelope(out)["status"] == "error"
    assert not (tmp_path / "acceptance.html").exists()
    with pytest.raises(OutputError, match=r"\$\.bandwidth\[0\]\.gbps is nan"):
        write_report({**report, "bandwidth": [{"gbps": float("nan")}]}, tmp_path / "out")
    assert not (tmp_path / "out" / "acceptance.json").exists()
