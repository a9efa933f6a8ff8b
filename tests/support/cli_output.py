"""A command's `--format json` output, read as programs read it: exactly one JSON document
on stdout (json.loads refuses anything after it), valid against the envelope's schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "schemas" / "cli-output.schema.json"
VALIDATOR = Draft202012Validator(json.loads(SCHEMA_FILE.read_text()))


def _not_json(literal: str) -> Any:
    raise AssertionError(f"{literal} in the output: JSON has no such number")


def envelope(stdout: str) -> dict[str, Any]:
    """The whole document; AssertionError naming the first schema error."""
    document = json.loads(stdout, parse_constant=_not_json)  # NaN, Infinity: not JSON
    problems = sorted(VALIDATOR.iter_errors(document), key=lambda e: list(e.absolute_path))
    assert not problems, f"{problems[0].json_path}: {problems[0].message}"
    assert isinstance(document, dict)
    return document


def result(stdout: str) -> Any:
    """The command's own result, out of its envelope."""
    return envelope(stdout)["result"]
