"""The child process that gathers facts with pyinfra: `python -m cluster_plan.day2.remote.gather`.

Reads one JSON request on stdin: {"hosts": {name: pyinfra host data}, "collect": NAME,
"options": {name: {...}}}; connects to every host in parallel, runs the collector NAME
(cluster_plan.day2.remote.collect) on each, and prints one JSON document on stdout:
{name: {"reachable": true, "facts": {...}, "errors": {...}}} or {name: {"reachable":
false, "reason": "..."}}. gevent's monkey-patching happens here first, and only here.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import contextlib  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402
from typing import Any, ClassVar  # noqa: E402

from pyinfra.api import Config, Inventory, State  # noqa: E402
from pyinfra.api.connect import connect_all, disconnect_all  # noqa: E402
from pyinfra.api.exceptions import PyinfraError  # noqa: E402
from pyinfra.api.state import BaseStateCallback  # noqa: E402

from cluster_plan.day2.remote.collect import COLLECTORS  # noqa: E402


class _ConnectErrors(BaseStateCallback):
    """Keeps why each host could not be reached."""

    reasons: ClassVar[dict[str, str]] = {}

    @staticmethod
    def host_connect_error(state: State, host: Any, error: Any) -> None:
        reason = str(error.args[0] if error.args else error)
        if any(words in reason for words in _NO_SSH):
            reason += ": the connection closed before SSH began (host down, or port closed)"
        _ConnectErrors.reasons[host.name] = reason


# paramiko's words when the proxy or the TCP connection ends before the SSH handshake
_NO_SSH = ("No existing session", "Error reading SSH protocol banner")


def gather(request: dict[str, Any]) -> dict[str, Any]:
    hosts = request["hosts"]
    collector = COLLECTORS[request["collect"]]
    options = request.get("options", {})
    inventory = Inventory((list(hosts.items()), {}))
    state = State(inventory, Config(CONNECT_TIMEOUT=int(request.get("connect_timeout", 10))))
    state.add_callback_handler(_ConnectErrors())
    with contextlib.suppress(PyinfraError):  # no host answered: each is reported below
        connect_all(state)
    results: dict[str, Any] = {}
    running = {
        state.pool.spawn(collector, state, host, options.get(host.name, {})): host
        for host in state.activated_hosts
    }
    for greenlet, host in running.items():
        greenlet.join()
        if greenlet.successful():
            facts, errors = greenlet.value
            results[host.name] = {"reachable": True, "facts": facts, "errors": errors}
        else:
            results[host.name] = {"reachable": False, "reason": f"lost: {greenlet.exception}"}
    for name in hosts:
        if name not in results:
            reason = _ConnectErrors.reasons.get(name, "could not connect")
            results[name] = {"reachable": False, "reason": reason}
    try:
        disconnect_all(state)
    except Exception as exc:  # a host that went away while we read it; the results stand
        logging.getLogger(__name__).debug("disconnect: %s", exc)
    return results


def main() -> int:
    request = json.load(sys.stdin)
    out = sys.stdout
    sys.stdout = sys.stderr  # pyinfra prints host output on stdout; the result owns it
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    json.dump(gather(request), out)
    out.write("\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
