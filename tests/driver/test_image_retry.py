"""A failed read of the metadata image is tried again with a back-off until it succeeds.

At start-up a broker registers (FENCED) and then reads the metadata image; if that read fails
(the coordinator is unreachable for a moment, the quorum elects) the broker once stayed FENCED
for good. After a feed gap the snapshot read that follows once left the feed stuck. Both now
retry on ticks, every failure logged, the wait doubling from ``IMAGE_RETRY_MS_MIN``."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from replog.broker.driver import BrokerState
from replog.broker.driver.effects import CoordCall
from replog.broker.driver.metadata_channel import IMAGE_RETRY_MS_MAX, IMAGE_RETRY_MS_MIN
from replog.coord.errors import CoordinatorUnavailableError, MustResyncError
from replog.coord.memory import MemoryCoordinator

from .shell import ScriptedShell


class _FailingReads:
    """A coordinator whose next ``snapshots`` snapshot reads (and ``gaps`` feed reads) fail;
    ``snapshot_at_ms`` records when each snapshot read was made."""

    def __init__(self, inner: MemoryCoordinator, shell: ScriptedShell) -> None:
        self._inner = inner
        self._shell = shell
        self.snapshots = 0
        self.gaps = 0
        self.snapshot_at_ms: list[int] = []

    def snapshot(self, **kwargs: Any) -> Any:
        self.snapshot_at_ms.append(self._shell.now_ms)
        if self.snapshots > 0:
            self.snapshots -= 1
            raise CoordinatorUnavailableError("the quorum elects")
        return self._inner.snapshot(**kwargs)

    def changes_since(self, seq: int, **kwargs: Any) -> Any:
        if self.gaps > 0:
            self.gaps -= 1
            raise MustResyncError(seq, seq + 1)
        return self._inner.changes_since(seq, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _Shell(ScriptedShell):
    """The broker's own image and feed reads go through ``failing``; the rest (registration,
    the controller this one-broker cluster runs) reaches the store directly."""

    failing: _FailingReads

    def _call(self, effect: CoordCall) -> None:
        if effect.what not in ("snapshot", "feed"):
            super()._call(effect)
            return
        try:
            result, error = effect.call(self.failing), None
        except Exception as exc:
            result, error = None, exc
        self.driver.on_coord_done(effect.token, result, error, self.now_ms)


def _shell(tmp_path: Any) -> tuple[_Shell, _FailingReads]:
    shell = _Shell(tmp_path, metadata_image_cache_enable=False)
    shell.failing = _FailingReads(shell.coordinator, shell)
    return shell, shell.failing


def test_a_failed_start_snapshot_is_retried_until_the_broker_comes_online(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    shell, coord = _shell(tmp_path)
    coord.snapshots = 4
    with caplog.at_level(logging.WARNING, logger="replog.broker.driver.metadata_channel"):
        shell.start(online=False)
        assert shell.driver.state is BrokerState.FENCED
        for _ in range(200):
            if shell.driver.state is BrokerState.ONLINE:
                break
            shell.tick(10)
    assert shell.driver.state is BrokerState.ONLINE
    waits = [b - a for a, b in zip(coord.snapshot_at_ms, coord.snapshot_at_ms[1:], strict=False)]
    assert waits == [IMAGE_RETRY_MS_MIN * f for f in (1, 2, 4, 8)]  # ticks of 10 ms hit them
    failures = [r for r in caplog.records if "reading the metadata image failed" in r.message]
    assert len(failures) == 4 and "the quorum elects" in failures[-1].message
    assert shell.driver.metadata.image_read_failures == 0


def test_the_back_off_is_bounded(tmp_path: Any) -> None:
    shell, coord = _shell(tmp_path)
    coord.snapshots = 10
    shell.start(online=False)
    for _ in range(2_000):
        if shell.driver.state is BrokerState.ONLINE:
            break
        shell.tick(50)
    assert shell.driver.state is BrokerState.ONLINE
    waits = [b - a for a, b in zip(coord.snapshot_at_ms, coord.snapshot_at_ms[1:], strict=False)]
    assert max(waits) == IMAGE_RETRY_MS_MAX and waits[-1] == IMAGE_RETRY_MS_MAX


def test_a_halted_broker_stops_retrying(tmp_path: Any) -> None:
    shell, coord = _shell(tmp_path)
    coord.snapshots = 1_000
    shell.start(online=False)
    shell.tick(IMAGE_RETRY_MS_MIN)
    reads = len(coord.snapshot_at_ms)
    assert reads == 2
    shell.driver.halt()
    for _ in range(100):
        shell.tick(IMAGE_RETRY_MS_MAX)
    assert len(coord.snapshot_at_ms) == reads


def test_a_feed_gap_whose_snapshot_fails_is_resumed(tmp_path: Any) -> None:
    """The feed reports a gap and the snapshot read that should fill it fails twice: the
    broker reads it again and sees what the store holds (once, the feed stayed stuck)."""
    shell, coord = _shell(tmp_path)
    shell.start()
    controller = coord.current_controller()
    assert controller is not None
    epoch = controller.controller_epoch
    coord.gaps, coord.snapshots = 1, 2
    coord.create_topic("t", [[1]], controller_epoch=epoch)
    for _ in range(100):
        shell.tick(50)
        if "t" in shell.driver.rm.image.topics:
            break
    assert "t" in shell.driver.rm.image.topics
    assert len(coord.snapshot_at_ms) == 4  # the start, then the gap's read and its two retries
    coord.create_topic("u", [[1]], controller_epoch=epoch)
    for _ in range(10):
        shell.tick(50)
    assert "u" in shell.driver.rm.image.topics  # the feed moves on
