"""Findings: JSON paths, the printed form (file:line:col, $.path, caret, hint), filters."""

from __future__ import annotations

import pytest

from cluster_plan.plan.findings import Finding, PlanError, errors, format_path, sort_key, warnings


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ((), "$"),
        (("networks", "mgmt", "cidr"), "$.networks.mgmt.cidr"),
        (("hardware", "gpu-h100", "accelerators"), "$.hardware['gpu-h100'].accelerators"),
        (("storage", "ceph", "pools", 0, "size"), "$.storage.ceph.pools[0].size"),
        (
            ("node_groups", "gpu", "nodes", "gpu01", "address", "mgmt"),
            "$.node_groups.gpu.nodes.gpu01.address.mgmt",
        ),
        (("a b",), "$['a b']"),
        (("1st",), "$['1st']"),
        (("_x",), "$._x"),
        (("hardware", None, "disks"), "$.hardware['None'].disks"),  # a broken plan's null key
        (("a", 1.5), "$.a['1.5']"),
    ],
)
def test_format_path(path, text):
    assert format_path(path) == text
    assert Finding("c", "m", path).json_path == text


SOURCE = ["plugin: cluster_plan", "networks:", "  mgmt: {cidr: 10.40.0.7/24}"]


def test_render_points_at_file_line_column_with_a_caret_and_hint():
    finding = Finding(
        "network-address",
        "'10.40.0.7/24' has host bits set",
        ("networks", "mgmt", "cidr"),
        hint="use 10.40.0.0/24",
        file="plan.yml",
        line=3,
        column=16,
    )
    assert finding.render(SOURCE).splitlines() == [
        "plan.yml:3:16: error[network-address] $.networks.mgmt.cidr: "
        "'10.40.0.7/24' has host bits set",
        "      mgmt: {cidr: 10.40.0.7/24}",
        "    " + " " * 15 + "^",
        "    hint: use 10.40.0.0/24",
    ]
    # the caret sits under the first character of the value
    source_line, caret = finding.render(SOURCE).splitlines()[1:3]
    assert source_line[caret.index("^") :].startswith("10.40.0.7/24")


def test_render_without_position_or_source():
    assert (
        Finding("lock-missing", "no lock", (), file="p.lock.json").render()
        == "p.lock.json: error[lock-missing] $: no lock"
    )
    assert Finding("x", "y", ("a",), severity="warning").render() == "<plan>: warning[x] $.a: y"
    # a line beyond the source (e.g. a stale position) prints no source line
    finding = Finding("x", "y", (), file="f", line=99, column=1)
    assert finding.render(SOURCE) == "f:99:1: error[x] $: y"


def test_as_dict_is_json_ready():
    finding = Finding(
        "enum",
        "bad",
        ("scheduler", "type"),
        hint="did you mean 'slurm'?",
        file="p.yml",
        line=4,
        column=9,
    )
    assert finding.as_dict() == {
        "severity": "error",
        "code": "enum",
        "file": "p.yml",
        "line": 4,
        "column": 9,
        "path": "$.scheduler.type",
        "message": "bad",
        "hint": "did you mean 'slurm'?",
        "suppressed_by": None,
    }


def test_located_keeps_everything_else():
    finding = Finding("c", "m", ("a", 1), "warning", "h", suppressed_by="why")
    moved = finding.located("f.yml", 3, 7)
    assert (moved.file, moved.line, moved.column) == ("f.yml", 3, 7)
    assert (
        moved.code,
        moved.message,
        moved.path,
        moved.severity,
        moved.hint,
        moved.suppressed_by,
    ) == ("c", "m", ("a", 1), "warning", "h", "why")


def test_errors_and_warnings_leave_out_suppressed_findings():
    found = [
        Finding("e", "m"),
        Finding("w", "m", severity="warning"),
        Finding("s", "m", severity="warning", suppressed_by="reason"),
    ]
    assert [f.code for f in errors(found)] == ["e"]
    assert [f.code for f in warnings(found)] == ["w"]


def test_sort_key_orders_by_file_then_position():
    found = [
        Finding("b", "m", file="b.yml", line=1, column=1),
        Finding("a", "m", file="a.yml", line=9, column=1),
        Finding("c", "m", file="a.yml", line=2, column=5),
        Finding("d", "m", file="a.yml"),
    ]
    assert [f.code for f in sorted(found, key=sort_key)] == ["d", "c", "a", "b"]


def test_plan_error_lists_every_unsuppressed_finding():
    found = [
        Finding("one", "first", file="p", line=1, column=1),
        Finding("two", "second", ("x",), file="p", line=2, column=1),
        Finding("hidden", "quiet", severity="warning", suppressed_by="ok"),
    ]
    error = PlanError(found, ["a: 1", "x: 2"])
    text = str(error)
    assert "p:1:1: error[one] $: first" in text
    assert "p:2:1: error[two] $.x: second" in text
    assert "hidden" not in text
    assert error.findings == found
