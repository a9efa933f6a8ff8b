"""`make test` as two pytest runs at once, each given one side of the session by
CLUSTER_PLAN_SPLIT:

- `session`: the session lab's chain, each step waiting on the one before: its bare-lab
  tests, its converge, the converged lab's tests, its changes. This is the run's long pole.
- `beside` (started at nice 10): everything else, first the labs of their own (the
  Kubernetes lab, the lifecycle labs), then the tests that need no lab. It takes the cores
  the chain leaves idle: the converged lab's tests and its changes keep under one of two
  busy. Its nice ranks its processes below the session's, not its labs' nodes, which run
  in cgroups of their own: weighting those too starved the Kubernetes lab (docs/lab.md).

The labs of their own go first so that the Kubernetes lab's image pulls meet the session
lab's converge, not the storage proofs among its changes, which wait on the disk. Without
the variable (a selection of one's own, `make test PYTEST_ARGS=...`) one run takes it all.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

SPLIT_ENV = "CLUSTER_PLAN_SPLIT"
SIDES = ("session", "beside")
BESIDE_PART = 1  # lab_session.part_of: no lab, or a lab of its own
_LEFT_TO_OTHER = pytest.StashKey[int]()


def side() -> str | None:
    """The side this run takes, None for the whole session; a usage error for a value that
    names neither."""
    value = os.environ.get(SPLIT_ENV, "")
    if not value:
        return None
    if value not in SIDES:
        raise pytest.UsageError(
            f"{SPLIT_ENV}={value!r}: expected one of {', '.join(SIDES)} (or unset for one run)"
        )
    return value


def split(
    config: pytest.Config, items: list[pytest.Item], part_of: Callable[[pytest.Item], int]
) -> list[pytest.Item]:
    """The items of this run's side, the others deselected in pytest's way (counted as
    deselected, and their number in the summary); on the side beside, labs of their own
    first."""
    taken = side()
    if taken is None:
        return items
    kept: list[pytest.Item] = []
    others: list[pytest.Item] = []
    for item in items:
        mine = (part_of(item) == BESIDE_PART) == (taken == "beside")
        (kept if mine else others).append(item)
    if taken == "beside":
        kept.sort(key=lambda item: item.get_closest_marker("lab") is None)
    if others:
        config.hook.pytest_deselected(items=others)
    config.stash[_LEFT_TO_OTHER] = len(others)
    return kept


def summary(terminalreporter: pytest.TerminalReporter) -> None:
    left = terminalreporter.config.stash.get(_LEFT_TO_OTHER, 0)
    taken = side()
    if taken is not None:
        other = "beside" if taken == "session" else "session"
        terminalreporter.write_line(
            f"{SPLIT_ENV}={taken}: {left} tests left to the run on the {other} side"
        )
