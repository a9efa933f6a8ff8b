"""`scontrol show node --oneliner` lines for the drain tests: the line recorded on the lab's
head01 for cpu01 (fixtures/scontrol-head01.json, Slurm 22.05.8) with its State, and a Reason
with who set it and when, as Slurm prints them for a node drained, draining or down."""

from __future__ import annotations

import json
from pathlib import Path

RECORDED = json.loads((Path(__file__).parent / "fixtures" / "scontrol-head01.json").read_text())
CPU01 = next(line for line in RECORDED["stdout"].splitlines() if line.startswith("NodeName=cpu01"))
assert " State=IDLE " in CPU01


def node_line(node: str = "cpu01", state: str = "IDLE", reason: str | None = None) -> str:
    """The recorded line, for `node`, in `state`, with `reason` set by root."""
    line = CPU01.replace("NodeName=cpu01", f"NodeName={node}").replace(
        " State=IDLE ", f" State={state} "
    )
    if reason is not None:
        line += f" Reason={reason} [root@2026-11-30T18:40:02]"
    return line + "\n"
