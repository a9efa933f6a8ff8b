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


def refuse(message: str) -> int:
    """Tell why, where the user will see it, and fail the connection.

    With ControlPersist (ansible.cfg), ssh sends a ProxyCommand's stderr to /dev/null, so
    the reason also goes to ssh as a malformed version line, which ssh prints as
    "Bad remote protocol version identification: 'SSH-...'" (first 100 characters).
    """
    print(f"cluster-plan lab: {message}", file=sys.stderr)
    sys.stdout.write(f"SSH-{message}\r\n")
    sys.stdout.flush()
    return 255


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m cluster_plan.lab.proxycommand ADMIN_NS HOST PORT", file=sys.stderr)
        return 2
    admin_ns, host, port = argv
    if not Path("/run/netns", admin_ns).exists():
        lab = admin_ns.removeprefix("cpl-").removesuffix("-admin")
        return refuse(f"the lab '{lab}' is not up; run cluster-plan lab up PLAN first")
    if os.geteuid() != 0:
        return refuse("reaching lab nodes needs root (ip netns exec)")
    if shutil.which("nc") is None:
        return refuse("nc is not installed (apt-get install netcat-openbsd)")
    os.execvp("ip", ["ip", "netns", "exec", admin_ns, "nc", host, port])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
