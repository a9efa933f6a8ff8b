"""Real iperf3 -J and fping outputs, healthy and broken: broken is a failed measurement."""

from __future__ import annotations

import pytest
from acceptance_sim import fixture, fixture_result

from cluster_plan.acceptance.fping import (
    loss_lower_bound_pct,
    loss_upper_bound_pct,
    parse_fping_count,
    parse_fping_vcount,
    probes_for_loss,
)
from cluster_plan.acceptance.iperf import parse_iperf3
from cluster_plan.transport.execution import CommandResult


def test_bidir_ok_gives_both_directions() -> None:
    sample = parse_iperf3(fixture_result("iperf3_bidir_ok"))
    assert sample.ok and sample.raw is None
    assert sample.forward_bps is not None and sample.reverse_bps is not None
    # the recording ran at -b 200M each way
    assert 190e6 < sample.forward_bps < 210e6
    assert 190e6 < sample.reverse_bps < 210e6
    assert sample.bps == min(sample.forward_bps, sample.reverse_bps)


def test_one_way_ok_has_no_reverse() -> None:
    sample = parse_iperf3(fixture_result("iperf3_one_way_ok"))
    assert sample.ok and sample.reverse_bps is None and sample.bps == sample.forward_bps


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("iperf3_empty", "printed nothing"),
        ("iperf3_text_after_json", "text after its JSON"),
        ("iperf3_printed_twice", "more than one JSON object"),
        ("iperf3_nan", "not JSON"),
        ("iperf3_missing", "not found"),
        ("iperf3_crash", "not JSON"),
        ("iperf3_refused", "Connection refused"),
    ],
)
def test_broken_iperf3_is_a_failed_measurement_with_raw_output(name: str, message: str) -> None:
    result = fixture_result(name)
    sample = parse_iperf3(result)
    assert not sample.ok
    assert sample.bps is None
    assert sample.error is not None and message in sample.error
    assert sample.raw is not None and f"exit status {result.rc}" in sample.raw
    assert result.stdout[:200] in sample.raw


def test_nan_parsed_leniently_would_still_fail() -> None:
    # Python's json accepts NaN; a finite check must reject it too.
    text = str(fixture("iperf3_bidir_ok")["stdout"]).replace(
        '"bits_per_second":\t2', '"bits_per_second":\tNaN, "x":\t2'
    )
    sample = parse_iperf3(CommandResult(("iperf3",), 0, text, ""))
    assert not sample.ok and sample.error is not None and "finite" in sample.error


def test_nonzero_exit_with_clean_json_fails() -> None:
    f = fixture_result("iperf3_bidir_ok")
    sample = parse_iperf3(CommandResult(f.argv, 1, f.stdout, f.stderr))
    assert not sample.ok and sample.error == "iperf3 exited with status 1"


def test_timeout_fails() -> None:
    sample = parse_iperf3(CommandResult(("iperf3",), 124, "", "timed out after 9 s"))
    assert not sample.ok and sample.error == "iperf3 timed out"


def test_fping_vcount_counts_losses_per_target() -> None:
    f = fixture("fping_vcount_loss")
    samples = parse_fping_vcount(fixture_result("fping_vcount_loss"), f["targets"], f["probes"])
    clean, lossy = samples["127.0.0.2"], samples["127.0.0.3"]
    assert clean.ok and clean.sent == 50 and clean.received == 50 and clean.loss_pct == 0
    assert clean.median_ms is not None and clean.median_ms < 1
    assert lossy.ok and lossy.sent == 50 and 0 < lossy.received < 50
    expected = str(f["stderr"]).splitlines()[1].count(" -")
    assert lossy.sent - lossy.received == expected


def test_fping_all_lost_is_loss_not_error() -> None:
    samples = parse_fping_vcount(fixture_result("fping_unreachable"), ["127.0.0.2", "127.0.0.3"], 5)
    for sample in samples.values():
        assert sample.ok and sample.received == 0 and sample.loss_pct == 100
        assert sample.median_ms is None


@pytest.mark.parametrize("name", ["fping_missing", "fping_empty", "fping_truncated"])
def test_broken_fping_is_a_failed_measurement(name: str) -> None:
    samples = parse_fping_vcount(fixture_result(name), ["127.0.0.2", "127.0.0.3"], 50)
    for sample in samples.values():
        assert not sample.ok and sample.loss_pct is None and sample.raw
    assert "exit status" in samples["127.0.0.3"].raw  # type: ignore[operator]


def test_fping_missing_target_line_fails_only_that_target() -> None:
    result = CommandResult(("fping",), 0, "", "10.0.0.1 : 0.1 0.2\n")
    samples = parse_fping_vcount(result, ["10.0.0.1", "10.0.0.2"], 2)
    assert samples["10.0.0.1"].ok
    assert not samples["10.0.0.2"].ok


def test_fping_garbage_values_fail() -> None:
    result = CommandResult(("fping",), 0, "", "10.0.0.1 : 0.1 nan\n10.0.0.2 : 0.1 -1.-\n")
    samples = parse_fping_vcount(result, ["10.0.0.1", "10.0.0.2"], 2)
    assert not samples["10.0.0.1"].ok and not samples["10.0.0.2"].ok


def test_mtu_probes() -> None:
    ok = parse_fping_count(fixture_result("fping_mtu_ok"), ["127.0.0.2"])["127.0.0.2"]
    assert ok.ok and ok.received == 3 and ok.raw is None
    too_big = parse_fping_count(fixture_result("fping_mtu_too_big"), ["127.0.0.2"])["127.0.0.2"]
    assert too_big.ok and too_big.received == 0 and too_big.raw is not None
    missing = parse_fping_count(fixture_result("fping_missing"), ["127.0.0.2"])["127.0.0.2"]
    assert not missing.ok


def test_probe_count_decides_the_threshold() -> None:
    assert probes_for_loss(0.1) == 3000
    assert probes_for_loss(1) == 300
    assert probes_for_loss(0) == 3000  # no loss allowed: the first lost probe fails
    with pytest.raises(ValueError):
        probes_for_loss(-1)
    # zero losses in that many probes bound the loss at (just under) the threshold
    assert loss_upper_bound_pct(3000, 3000) == pytest.approx(0.0998, abs=2e-4)
    assert loss_upper_bound_pct(300, 300) <= 1.0
    assert loss_upper_bound_pct(3000, 2940) > 2.0  # 2% lost: clearly above
    assert loss_upper_bound_pct(0, 0) == 100.0


def test_loss_lower_bound_decides_a_clear_failure_early() -> None:
    assert loss_lower_bound_pct(300, 300) == 0.0
    assert loss_lower_bound_pct(300, 299) < 0.1  # one loss in 300 proves nothing
    assert loss_lower_bound_pct(300, 294) > 0.1  # 2% of 300: clearly above 0.1%
    assert loss_lower_bound_pct(100, 98) < loss_upper_bound_pct(100, 98)
