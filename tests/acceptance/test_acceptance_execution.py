"""The transport boundary: prefixes, quoting, missing tools, timeouts, unreachable nodes."""

from __future__ import annotations

from cluster_plan.acceptance.execution import PrefixExecutor


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
