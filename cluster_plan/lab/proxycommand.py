"""SSH ProxyCommand for lab nodes: `ip netns exec <admin ns> nc HOST PORT`.

The admin namespace has no default route, so a connection can only reach the lab; when
the lab is down the namespace is missing and this exits at once with a clear message
instead of letting SSH try a private address from the root namespace.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m cluster_plan.lab.proxycommand ADMIN_NS HOST PORT", file=sys.stderr)
        return 2
    admin_ns, host, port = argv
    if not Path("/run/netns", admin_ns).exists():
        lab = admin_ns.removeprefix("cpl-").removesuffix("-admin")
        print(f"cluster-plan lab: the lab {lab!r} is not up (no namespace {admin_ns}); "
              "run `cluster-plan lab up PLAN` first", file=sys.stderr)
        return 255
    if os.geteuid() != 0:
        print("cluster-plan lab: reaching lab nodes needs root (ip netns exec)", file=sys.stderr)
        return 255
    if shutil.which("nc") is None:
        print("cluster-plan lab: nc (netcat-openbsd) is not installed", file=sys.stderr)
        return 255
    os.execvp("ip", ["ip", "netns", "exec", admin_ns, "nc", host, port])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
