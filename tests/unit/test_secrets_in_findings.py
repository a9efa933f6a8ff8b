"""A secret in a plan never reaches a finding: the userinfo of a URL (`user:password@`) and the
value of every field the schema marks `writeOnly` (a webhook's URL carries its token) are
masked in a finding's message and hint and in the source line quoted under it, in text and in
JSON, so a CI log of a refused plan does not print the password it refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cluster_plan import cli
from cluster_plan.plan.findings import Finding
from cluster_plan.plan.schema import plan_schema, secret_values
from cluster_plan.plan.secrets import mask_userinfo
from cluster_plan.plan.validate import validate_text

ROOT = Path(__file__).resolve().parents[2]
BASE = (ROOT / "tests" / "plans" / "base.yml").read_text()
MONITORED = BASE.replace("ceph_mgr]}", "ceph_mgr, monitoring_server]}", 1)


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("http://builder:s3cr3t@proxy:3142/x", "http://***@proxy:3142/x"),
        ("'https://u:p@ss@h/'", "'https://***@h/'"),  # a password with '@' in it
        ("postgresql://acceptance@db/history", "postgresql://***@db/history"),
        ("http://proxy:3142 and mail@example.org", "http://proxy:3142 and mail@example.org"),
        ("https://h/a@b", "https://h/a@b"),  # an '@' in the path is no userinfo
    ],
)
def test_mask_userinfo(text, masked):
    assert mask_userinfo(text) == masked


def test_the_schema_marks_the_webhook_secret():
    node = plan_schema()["properties"]["monitoring"]["properties"]["receivers"]
    assert node["additionalProperties"]["properties"]["webhook"]["writeOnly"] is True


def _run(capsys, path: Path, *argv: str) -> str:
    code = cli.main(["validate", "--no-lock", *argv, str(path)])
    out, err = capsys.readouterr()
    assert code == 1
    return out + err


def test_a_refused_url_with_a_password_is_not_printed(tmp_path, capsys):
    plan = tmp_path / "plan.yml"
    plan.write_text(
        BASE + 'packages: {proxy: "http://builder:s3cr3t-pa55@proxy.bad.internal:3142"}\n'
    )
    text = _run(capsys, plan)
    assert "error[format] $.packages.proxy" in text
    assert "http://***@proxy.bad.internal:3142" in text  # the message and the quoted line
    assert text.count("***@") >= 2
    assert "s3cr3t" not in text and "builder" not in text
    document = _run(capsys, plan, "--format", "json")
    assert "s3cr3t" not in document and "builder" not in document
    (finding,) = json.loads(document)["findings"]
    assert "***@proxy.bad.internal" in finding["message"]


def test_a_secret_field_is_masked_wherever_a_finding_quotes_it(tmp_path, capsys):
    token = "https://hooks.slack.example/services/T0/B0/Xy7tokenvalue"
    plan = tmp_path / "plan.yml"
    plan.write_text(MONITORED + f"monitoring:\n  receivers:\n    ops: {{webhook: '{token}?x=1'}}\n")
    text = _run(capsys, plan)
    assert "error[format] $.monitoring.receivers.ops.webhook" in text
    assert "Xy7tokenvalue" not in text
    assert "***" in text
    assert "Xy7tokenvalue" not in _run(capsys, plan, "--format", "json")


def test_a_long_secret_quoted_cut_short_is_masked_too():
    token = "https://hooks.slack.example/services/T0AAAAAAA/B0BBBBBBB/" + "Z" * 40
    result = validate_text(
        MONITORED + f"monitoring:\n  receivers:\n    ops: {{webhook: '{token}?q'}}\n"
    )
    (finding,) = [f for f in result.findings if f.code == "format"]
    assert "T0AAAAAAA" not in finding.message + (finding.hint or "")
    assert "T0AAAAAAA" not in "\n".join(result.doc.source_lines)


def test_secret_values_are_the_written_values_of_writeonly_fields():
    data = validate_text(
        MONITORED + "monitoring:\n  receivers:\n    ops: {webhook: 'https://h/t0ken'}\n"
    ).doc.data
    assert secret_values(data) == {"https://h/t0ken"}
    assert secret_values({"monitoring": {"receivers": "not a mapping"}}) == set()


def test_a_finding_renders_a_lock_or_other_file_masked_too():
    finding = Finding("x", "bad 'http://a:b@h/'", ("p",), file="f", line=1, column=1)
    shown = finding.render(["url: http://a:b@h/"])
    assert "a:b@" not in shown and shown.count("http://***@h/") == 2
    assert "a:b@" not in json.dumps(finding.as_dict())
