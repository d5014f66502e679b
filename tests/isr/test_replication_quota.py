"""Replication quotas (KIP-73): the windowed byte rate, its bound, and who is throttled."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.errors import InvalidConfigError
from replog.isr.replication_quota import RateQuota, should_throttle


def test_an_unbounded_quota_is_never_exceeded() -> None:
    quota = RateQuota()
    quota.record(10**12, now_ms=0)
    assert not quota.is_exceeded(0)


def test_the_rate_spreads_a_burst_over_at_least_one_window() -> None:
    quota = RateQuota(window_count=11, window_ms=1_000, bound_bytes_per_s=1_000)
    quota.record(1_000, now_ms=5_000)
    assert quota.rate_bytes_per_s(5_000) == 1_000.0  # divided by one window, not by 0 ms
    assert not quota.is_exceeded(5_000)  # exceeded means above the bound
    quota.record(1, now_ms=5_000)
    assert quota.is_exceeded(5_000)


def test_an_overshoot_is_paid_back_before_the_next_send() -> None:
    quota = RateQuota(window_count=11, window_ms=1_000, bound_bytes_per_s=1_000)
    quota.record(5_000, now_ms=0)  # five seconds' worth in one fetch
    assert quota.is_exceeded(4_999)
    assert not quota.is_exceeded(5_000)  # 5000 B over 5 s
    quota.record(5_000, now_ms=5_000)
    assert quota.is_exceeded(9_999) and not quota.is_exceeded(10_000)


def test_samples_older_than_the_kept_windows_are_forgotten() -> None:
    quota = RateQuota(window_count=3, window_ms=1_000, bound_bytes_per_s=10)
    quota.record(1_000, now_ms=0)
    quota.record(5, now_ms=1_000)
    assert quota.is_exceeded(2_999)
    assert quota.rate_bytes_per_s(3_000) == 2.5  # the first sample is gone: 5 B over 2 s
    assert not quota.is_exceeded(3_000)
    assert quota.rate_bytes_per_s(4_000) == 0.0


def test_records_within_a_window_share_its_sample() -> None:
    quota = RateQuota(window_count=2, window_ms=1_000, bound_bytes_per_s=None)
    quota.record(100, now_ms=0)
    quota.record(100, now_ms=999)  # same sample, started at 0
    assert quota.rate_bytes_per_s(1_999) == 200 * 1000 / 1_999
    assert quota.rate_bytes_per_s(2_000) == 0.0  # that one sample expired at once


def test_the_bound_can_change_and_zero_stops_everything() -> None:
    quota = RateQuota(bound_bytes_per_s=None)
    quota.record(1, now_ms=0)
    quota.set_bound(0)
    assert quota.is_exceeded(0)
    quota.set_bound(1_000_000)
    assert not quota.is_exceeded(0)


def test_window_settings_are_checked() -> None:
    with pytest.raises(InvalidConfigError):
        RateQuota(window_count=0)
    with pytest.raises(InvalidConfigError):
        RateQuota(window_ms=0)


@pytest.mark.parametrize(
    ("in_set", "in_sync", "exceeded", "throttled"),
    [
        (True, False, True, True),
        (True, True, True, False),  # in-sync replicas are never throttled
        (False, False, True, False),
        (True, False, False, False),
    ],
)
def test_only_out_of_sync_replicas_in_the_set_are_throttled_past_the_quota(
    in_set: bool, in_sync: bool, exceeded: bool, throttled: bool
) -> None:
    assert (
        should_throttle(in_throttled_set=in_set, in_sync=in_sync, quota_exceeded=exceeded)
        is throttled
    )


@settings(max_examples=200, deadline=None)
@given(
    bound=st.integers(1, 200_000),
    sends=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 100_000)), max_size=300),
    window_count=st.integers(2, 12),
    window_ms=st.sampled_from([100, 250, 1_000]),
)
def test_a_sender_that_waits_for_the_quota_stays_under_the_documented_bound(
    bound: int, sends: list[tuple[int, int]], window_count: int, window_ms: int
) -> None:
    """Whatever the send sizes and their timing, the bytes sent in any stretch of T shorter
    than (window_count - 1) windows stay under bound * (T + window_count windows) plus the
    largest single send (the module docstring's claim, which the live test relies on)."""
    quota = RateQuota(window_count=window_count, window_ms=window_ms, bound_bytes_per_s=bound)
    now_ms, sent = 0, []
    for gap_ms, size in sends:
        now_ms += gap_ms
        if not quota.is_exceeded(now_ms):
            quota.record(size, now_ms)
            sent.append((now_ms, size))
    largest = max((size for _, size in sent), default=0)
    span_ms = (window_count - 1) * window_ms
    for i, (start_ms, _) in enumerate(sent):
        total = 0
        for at_ms, size in sent[i:]:
            if at_ms - start_ms >= span_ms:
                break
            total += size
            limit = bound * (at_ms - start_ms + window_count * window_ms) / 1000 + largest
            assert total <= limit
