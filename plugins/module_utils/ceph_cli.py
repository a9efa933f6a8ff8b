"""Running the `ceph` CLI from modules: JSON in, clear errors out."""

from __future__ import annotations

import json
from typing import Any

CEPH = "ceph"
TIMEOUT = "--connect-timeout=30"


class CephError(Exception):
    """A ceph command failed; str() names the command and Ceph's message."""


def ceph(module: Any, *args: str, as_json: bool = True, allow: tuple[int, ...] = ()) -> Any:
    """Run `ceph ARGS` (JSON output unless told otherwise).

    Returns the parsed output, or None when the command exited with a code in `allow`
    (e.g. ENOENT for an entity that does not exist yet).
    """
    argv = [CEPH, TIMEOUT, *args]
    if as_json:
        argv += ["--format", "json"]
    rc, out, err = module.run_command(argv)
    if rc in allow:
        return None
    if rc != 0:
        raise CephError(f"{' '.join(argv[2:])}: {(err or out).strip()} (exit {rc})")
    if not as_json:
        return out
    return json.loads(out) if out.strip() else None
