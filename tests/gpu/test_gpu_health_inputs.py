"""`python -m cluster_plan.gpu.health FACTS` on facts files that are not facts: exit 2 with
the file named in one line, never a traceback or a hang."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cluster_plan.gpu.health import main


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"[" * 5000 + b"]" * 5000, "nests too deeply"),
        (b'{"nvml": ' + b"1" * 5000 + b"}", "too long"),
        (b"[1, 2]", "a JSON object"),
        (b"\xff\xfe\x00\x01", "binary"),
        (None, "FIFO"),
    ],
    ids=["deep", "huge-number", "a-list", "binary", "fifo"],
)
def test_facts_that_are_not_facts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes | None, words: str
) -> None:
    facts = tmp_path / "facts.json"
    if content is None:
        os.mkfifo(facts)  # read, it would block for ever
    else:
        facts.write_bytes(content)
    assert main([str(facts)]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()
    assert str(facts) in line and words in line
    assert "Traceback" not in captured.out + captured.err
