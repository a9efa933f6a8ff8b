"""Lab daemons stop by themselves when their lab is gone, even if nobody kills them
(e.g. a namespace deleted by hand): each watches the namespace it serves."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

NETNS_DIR = Path("/run/netns")
PERIOD_S = 1.0


def netns_alive(name: str, inside: bool) -> bool:
    """Whether the named namespace exists (and, if `inside`, is the one we run in)."""
    try:
        named = os.stat(NETNS_DIR / name).st_ino
    except OSError:
        return False
    return not inside or named == os.stat("/proc/self/ns/net").st_ino


async def exit_when_gone(name: str, inside: bool) -> None:
    while netns_alive(name, inside):
        await asyncio.sleep(PERIOD_S)


def exit_process_when_gone(name: str, inside: bool) -> None:
    """For threaded servers: a daemon thread that ends the process with the namespace."""

    def watch() -> None:
        while netns_alive(name, inside):
            time.sleep(PERIOD_S)
        os._exit(0)  # the lab is gone: nothing to flush, nobody to answer

    threading.Thread(target=watch, daemon=True, name="lab-watchdog").start()
