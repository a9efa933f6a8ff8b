"""The transport boundary: prefixes, quoting, missing tools, timeouts, unreachable nodes."""

from __future__ import annotations

import argparse
from pathlib import Path

from cluster_plan.transport.execution import PrefixExecutor
from cluster_plan.transport.options import executor_for


def test_ssh_prefix_quotes_the_remote_command() -> None:
    ex = PrefixExecutor(["ssh", "root@{address}"], {"n1": "10.40.0.11"}, remote_shell=True)
    assert ex.command("n1", ["echo", "a b"]) == ("ssh", "root@10.40.0.11", "echo 'a b'")


def test_local_run_and_missing_tool_and_timeout() -> None:
    ex = PrefixExecutor()
    ok = ex.run("n1", ["sh", "-c", "echo out; echo err >&2; exit 3"], timeout=10)
    assert (ok.rc, ok.stdout, ok.stderr) == (3, "out\n", "err\n")
    missing = ex.run("n1", ["no-such-tool-here"], timeout=10)
    assert missing.rc == 127 and "not found" in missing.stderr
    slow = ex.run("n1", ["sleep", "5"], timeout=0.2)
    assert slow.rc == 124 and "timed out" in slow.stderr


def test_spawn_and_stop() -> None:
    handle = PrefixExecutor().spawn("n1", ["sleep", "30"])
    result = handle.stop()
    assert result.rc != 0  # terminated
    assert PrefixExecutor().spawn("n1", ["no-such-tool-here"]).stop().rc == 127


def test_node_without_a_prefix_is_never_run_here() -> None:
    ex = PrefixExecutor(per_node={"n1": ["env"]})
    assert ex.run("n1", ["true"], timeout=5).rc == 0
    refused = ex.run("n2", ["true"], timeout=5)
    assert refused.rc == 255 and "cannot reach" in refused.stderr
    assert ex.spawn("n2", ["true"]).stop().rc == 127


def test_ssh_masters_are_private_to_the_run(tmp_path: Path) -> None:
    # A shared ControlPath (%C hashes host, port, user) once reused a master into another
    # lab with the same addresses: the sockets must live in this run's own folder, first.
    ssh_args = "-o ControlPath=/shared/%C -o 'ProxyCommand=nc %h %p'"
    args = argparse.Namespace(
        transport="ssh", ssh_option=[], ssh_args=ssh_args, ssh_key="/k", ssh_user="root",
        exec_prefix=None, plan=Path("p.yml"),
    )  # fmt: skip
    executor = executor_for(args, {}, {"n1": "10.40.0.11"}, tmp_path)
    argv = executor.command("n1", ["true"])
    paths = [a for a in argv if a.startswith("ControlPath=")]
    assert paths[0] == f"ControlPath={tmp_path}/%C"
    assert "ProxyCommand=nc %h %p" in argv and argv[-2:] == ("root@10.40.0.11", "true")
