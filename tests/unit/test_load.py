"""Loading a plan: positions of keys and values, duplicate keys, merge keys, hostile YAML."""

from __future__ import annotations

import pytest

from cluster_plan.plan.load import load_plan_file, parse_plan_text

PLAN = """\
plugin: cluster_plan
cluster:
  name: lab
  domain: lab.internal
networks:
  mgmt: {cidr: 10.40.0.0/24, dns: [10.40.0.2, 10.40.0.3]}
node_groups:
  gpu:
    count: 2
"""


def codes(doc):
    return [f.code for f in doc.findings]


def test_positions_of_values_and_keys_are_one_based():
    doc = parse_plan_text(PLAN, "p.yml")
    assert doc.findings == []
    assert doc.data["networks"]["mgmt"]["dns"] == ["10.40.0.2", "10.40.0.3"]
    # value positions: line and column of the first character of the value
    assert doc.positions[("plugin",)] == (1, 9)
    assert doc.positions[("cluster", "domain")] == (4, 11)
    assert doc.positions[("networks", "mgmt", "cidr")] == (6, 16)
    assert doc.positions[("networks", "mgmt", "dns", 1)] == (6, 47)
    assert doc.positions[("node_groups", "gpu", "count")] == (9, 12)
    # key positions: where the key itself is written
    assert doc.key_positions[("node_groups", "gpu")] == (8, 3)
    assert doc.key_positions[("networks", "mgmt", "dns")] == (6, 30)


def test_locate_falls_back_to_the_nearest_ancestor():
    doc = parse_plan_text(PLAN, "p.yml")
    assert doc.locate(("node_groups", "gpu", "hostname")) == doc.positions[("node_groups", "gpu")]
    assert doc.locate(("nothing", "here")) == doc.positions[()]
    assert doc.locate(("node_groups", "gpu"), key=True) == (8, 3)


def test_duplicate_top_level_key_is_a_finding_and_the_first_value_is_kept():
    doc = parse_plan_text("plugin: cluster_plan\nversion: 1\nversion: 2\n", "p.yml")
    (finding,) = doc.findings
    assert (finding.code, finding.json_path, finding.line, finding.column) == (
        "duplicate-key",
        "$.version",
        3,
        1,
    )
    assert "line 2" in finding.message
    assert doc.data["version"] == 1


def test_duplicate_nested_key_in_a_flow_mapping():
    doc = parse_plan_text(
        "networks:\n  mgmt: {cidr: 10.0.0.0/24, mtu: 1500, cidr: 10.1.0.0/24}\n", "p.yml"
    )
    (finding,) = doc.findings
    assert (finding.code, finding.json_path, finding.line, finding.column) == (
        "duplicate-key",
        "$.networks.mgmt.cidr",
        2,
        40,
    )


def test_duplicate_keys_are_all_reported():
    doc = parse_plan_text("a: 1\na: 2\nb: {x: 1, x: 2}\na: 3\n", "p.yml")
    assert [(f.json_path, f.line) for f in doc.findings] == [("$.a", 2), ("$.b.x", 3), ("$.a", 4)]


def test_merge_keys_fill_in_without_overriding():
    text = """\
defaults: &gpu {hardware: gpu, count: 4, roles: [slurm_compute]}
node_groups:
  a: {<<: *gpu, count: 8}
  b:
    <<: [*gpu, {pool: big}]
    hostname: "b{n}"
"""
    doc = parse_plan_text(text, "p.yml")
    assert doc.findings == []
    groups = doc.data["node_groups"]
    assert groups["a"] == {"hardware": "gpu", "count": 8, "roles": ["slurm_compute"]}
    assert groups["b"] == {
        "hardware": "gpu",
        "count": 4,
        "roles": ["slurm_compute"],
        "pool": "big",
        "hostname": "b{n}",
    }
    # a merged key is not a duplicate, even when the mapping sets it too
    assert "duplicate-key" not in codes(doc)


@pytest.mark.parametrize(
    ("text", "code", "line"),
    [
        ("", "empty-plan", None),
        ("# only\n# comments\n", "empty-plan", None),
        ("- a\n- b\n", "not-a-mapping", 1),
        ("\n\n42\n", "not-a-mapping", 3),
        ("a: [1, 2\nb: 3\n", "yaml-syntax", 2),
        ("a: 1\n---\nb: 2\n", "multiple-documents", 3),
        ("a: !!python/name:os.system x\n", "yaml-value", 1),
        ("a: 1\nwhen: 2027-13-45\n", "yaml-value", 2),  # read as a date; month 13 cannot be
        ("a: &x [*x]\n", "yaml-value", 1),  # an alias cycle
        ("a: " + "[" * 500 + "]" * 500 + "\n", "yaml-value", 1),  # absurd nesting
        ("? [a, b]\n: 1\n", "complex-key", 1),
    ],
)
def test_bad_yaml_is_a_finding_not_an_exception(text, code, line):
    doc = parse_plan_text(text, "p.yml")
    assert codes(doc) == [code]
    assert doc.findings[0].line == line
    assert doc.findings[0].file == "p.yml"


def test_billion_laughs_stops_quickly():
    text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, 10):
        text += f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n"
    # the alias budget stopped the expansion (10**10 values): the finding is the proof; the
    # time it takes is a figure in benchmarks/bench_limits.py, not an assertion
    doc = parse_plan_text(text, "p.yml")
    assert codes(doc) == ["yaml-value"]
    assert "alias" in doc.findings[0].message


def test_modest_alias_reuse_is_fine():
    text = "d: &d {a: 1, b: 2}\n" + "".join(f"g{i}: *d\n" for i in range(1000))
    doc = parse_plan_text(text, "p.yml")
    assert doc.findings == []
    assert doc.data["g999"] == {"a": 1, "b": 2}


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"plugin: cluster_plan\n\x00\x01\x02", "not-text"),
        (b"plugin: cluster_plan\nname: \xff\xfe\n", "not-text"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "not-text"),
    ],
)
def test_binary_junk(raw, code):
    doc = parse_plan_text(raw, "p.yml")
    assert codes(doc) == [code]


def test_utf8_bom_is_accepted():
    doc = parse_plan_text("\ufeffplugin: cluster_plan\n".encode(), "p.yml")
    assert doc.findings == []
    assert doc.data == {"plugin": "cluster_plan"}


def test_unreadable_files(tmp_path):
    assert codes(load_plan_file(tmp_path / "nope.yml")) == ["file-not-found"]
    assert codes(load_plan_file(tmp_path)) == ["not-a-file"]


def test_too_large(monkeypatch):
    import cluster_plan.plan.load as load

    monkeypatch.setattr(load, "MAX_PLAN_BYTES", 100)
    assert codes(load.parse_plan_text(b"a: 1\n" * 50, "p.yml")) == ["plan-too-large"]


def test_an_endless_file_is_refused_without_reading_it_all():
    # reading /dev/zero to its end would never return: the finding proves the read stopped
    doc = load_plan_file("/dev/zero")
    assert codes(doc) == ["not-a-file"]  # a character device: refused before it is read


def test_crlf_line_endings_keep_positions():
    unix = parse_plan_text(PLAN, "p.yml")
    windows = parse_plan_text(PLAN.replace("\n", "\r\n").encode(), "p.yml")
    assert windows.findings == []
    assert windows.data == unix.data
    assert windows.positions == unix.positions
    assert windows.source_lines == unix.source_lines


def test_utf16_is_not_text():
    assert codes(parse_plan_text(PLAN.encode("utf-16"), "p.yml")) == ["not-text"]
