"""Replication quotas (KIP-73): a byte rate measured over sample windows, and the rule of when
a replica's replication is throttled.

Theory of operation. A ``RateQuota`` keeps up to ``window_count`` samples, each the bytes
recorded from its start for ``window_ms`` (a record at or after that opens the next sample).
Samples that started ``window_count * window_ms`` or longer ago are dropped. The measured rate
is the bytes of the samples kept divided by the time since the oldest of them started, at
least one window (Kafka's SimpleRate): a burst is spread over the time it is remembered, not
divided by the full span at once. The quota is exceeded while that rate is above the bound.

Bytes are recorded *after* they were sent (Kafka's rule), so one send can overshoot the bound;
the bytes it carried then keep the quota exceeded until the rate is back under the bound. For
any stretch of ``T`` seconds shorter than ``(window_count - 1)`` windows, the bytes recorded are
at most ``bound * (T + window_count * window_s) + `` the largest single record: each send was
allowed with the kept samples -- every record since the oldest kept sample's start, at most
``window_count`` windows back -- under ``bound`` times their span.

Who is throttled (``should_throttle``): a replica in the throttled set of its topic, while the
quota is exceeded and the replica is not in the ISR. In-sync replicas are never throttled, so
``acks=all`` produce latency does not depend on a reassignment's throttle -- though their bytes
count against the quota when their partition is in the throttled set (the caller records them).

Sans-IO: time comes in as ``now_ms`` (``replog.clock``), nothing here reads a clock.
"""

from __future__ import annotations

from collections import deque

import attrs

from replog.errors import InvalidConfigError, invariant

__all__ = ["RateQuota", "should_throttle"]


@attrs.define
class _Sample:
    start_ms: int
    size_bytes: int


@attrs.define
class RateQuota:
    """A byte rate over sample windows with a bound (``None``: unbounded, never exceeded)."""

    window_count: int = 11
    window_ms: int = 1_000
    bound_bytes_per_s: int | None = None
    _samples: deque[_Sample] = attrs.field(init=False, factory=deque)

    def __attrs_post_init__(self) -> None:
        if self.window_count < 1 or self.window_ms < 1:
            raise InvalidConfigError(
                f"quota windows must be >= 1 (count {self.window_count}, ms {self.window_ms})"
            )

    def set_bound(self, bound_bytes_per_s: int | None) -> None:
        """Change the bound; the samples (what was sent) stay."""
        invariant(
            bound_bytes_per_s is None or bound_bytes_per_s >= 0,
            f"a rate bound is >= 0, got {bound_bytes_per_s}",
        )
        self.bound_bytes_per_s = bound_bytes_per_s

    def record(self, size_bytes: int, now_ms: int) -> None:
        """Count ``size_bytes`` sent at ``now_ms`` (times never go back)."""
        invariant(size_bytes >= 0, f"recorded size {size_bytes} < 0")
        self._purge(now_ms)
        last = self._samples[-1] if self._samples else None
        invariant(last is None or now_ms >= last.start_ms, "quota time went back")
        if last is None or now_ms - last.start_ms >= self.window_ms:
            self._samples.append(_Sample(now_ms, size_bytes))
        else:
            last.size_bytes += size_bytes
        invariant(len(self._samples) <= self.window_count, "more samples than windows kept")

    def rate_bytes_per_s(self, now_ms: int) -> float:
        """The measured rate at ``now_ms`` (module docstring)."""
        self._purge(now_ms)
        if not self._samples:
            return 0.0
        total_bytes = sum(sample.size_bytes for sample in self._samples)
        elapsed_ms = max(now_ms - self._samples[0].start_ms, self.window_ms)
        return total_bytes * 1000.0 / elapsed_ms

    def is_exceeded(self, now_ms: int) -> bool:
        """True while the measured rate is above the bound."""
        bound = self.bound_bytes_per_s
        return bound is not None and self.rate_bytes_per_s(now_ms) > bound

    def _purge(self, now_ms: int) -> None:
        kept_ms = self.window_count * self.window_ms
        while self._samples and now_ms - self._samples[0].start_ms >= kept_ms:
            self._samples.popleft()


def should_throttle(*, in_throttled_set: bool, in_sync: bool, quota_exceeded: bool) -> bool:
    """Kafka's rule, the same on both sides: leave a partition's data out of this fetch (the
    leader answers it empty; the follower does not ask for it) when its replica is in the
    throttled set, is not in sync, and the quota is exceeded."""
    return in_throttled_set and not in_sync and quota_exceeded
