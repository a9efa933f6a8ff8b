"""Reading a JSON file a user named: numbers JSON has no word for are refused with the key
that holds them, and an unattended reader (follow=False) refuses links as well as FIFOs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cluster_plan.plan.input_files import InputError, first_non_finite, parse_json, read_json


@pytest.mark.parametrize(
    ("text", "where", "literal"),
    [
        ('{"hosts": [{"host": "a", "age_s": NaN}]}', "$.hosts[0].age_s", "NaN"),
        ('{"criteria": {"min_gbps": Infinity}}', "$.criteria.min_gbps", "Infinity"),
        ("[1, -Infinity]", "$[1]", "-Infinity"),
        ('{"power_w": 1e999}', "$.power_w", "1e999"),  # too large for a float: infinite
    ],
)
def test_non_finite_numbers_are_refused_with_their_key(text, where, literal):
    with pytest.raises(InputError) as refused:
        parse_json(text, "doc.json", "a report")
    assert str(refused.value) == (
        f"doc.json: not a report: {where} is {literal}: a number must be finite (JSON has no "
        "NaN or Infinity)"
    )


def test_finite_numbers_still_read():
    assert parse_json('{"a": [1.5, -2, 1e300]}', "doc.json") == {"a": [1.5, -2, 1e300]}
    assert first_non_finite({"a": [1.0, {"b": float("inf")}]}) == ("$.a[1].b", float("inf"))
    assert first_non_finite({"a": [1.0, 2]}) is None


def test_an_unattended_reader_refuses_a_link(tmp_path: Path):
    real = tmp_path / "real.json"
    real.write_text('{"ok": true}')
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert read_json(link, 1024) == {"ok": True}  # a user's command follows it
    with pytest.raises(InputError, match=r"link\.json: this is a symbolic link"):
        read_json(link, 1024, follow=False)


def test_an_unattended_reader_never_blocks_on_a_fifo(tmp_path: Path):
    fifo = tmp_path / "drift.json"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match=r"drift\.json: this is a FIFO"):
        read_json(fifo, 1024, follow=False)
