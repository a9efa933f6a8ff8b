"""Polling a lab until something holds, bounded: the lab tests' one wait."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    what: Callable[[], T], done: Callable[[T], bool], bound: float, step: float = 3
) -> T:
    """Ask `what` until `done` holds of its answer or `bound` seconds have passed; the last
    answer either way, for the caller's assertion to show."""
    deadline = time.monotonic() + bound
    while True:
        got = what()
        if done(got) or time.monotonic() > deadline:
            return got
        time.sleep(step)
