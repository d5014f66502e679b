"""A broker that stops while a ``__consumer_offsets`` partition is about to load: the load
never reads the partition's log once the logs are closed.

The race the shell leaves open: a coordinator call in flight when serving stops (here the
metadata feed read, holding a new leader epoch of the partition) completes after
``close_logs``, while the shell still awaits the unregistration; applying it starts a load,
which read the closed log and logged ``cannot load __consumer_offsets-0: Bad file
descriptor``. The test holds that call back and releases it after the logs closed, so the race
goes the bad way every time.
"""

from __future__ import annotations

import logging
from typing import Any

import attrs
import pytest

from replog.groups import OFFSETS_TOPIC
from replog.groups.records import OffsetCommitValue, OffsetRecord, encode_record
from replog.isr import Acks
from replog.log import encode_batch
from replog.metadata.types import PartitionState

from .shell import ScriptedShell


def _hosting_offsets(tmp_path: Any) -> ScriptedShell:
    """Broker 1 serving the groups of ``__consumer_offsets``-0 (its only replica), which
    holds one committed offset."""
    shell = ScriptedShell(tmp_path)
    shell.start()
    controller = shell.driver.rm.image.controller
    assert controller is not None
    state = PartitionState(replicas=(1,), leader=1, leader_epoch=0, isr=(1,))
    shell.coordinator.create_topic(
        OFFSETS_TOPIC, [[1]], controller_epoch=controller.controller_epoch, initial_states=[state]
    )
    for _ in range(30):  # past a metadata poll
        shell.tick(20)
    key, value = encode_record(
        OffsetRecord("g", "t", 0, OffsetCommitValue(offset=5, metadata="", commit_timestamp=0))
    )
    batch = encode_batch([value], keys=[key], base_timestamp=shell.clock.wall_ms())
    shell.driver.rm.produce(OFFSETS_TOPIC, 0, batch, Acks.ALL, shell.now_ms)
    shell.driver.after_input()
    shell.run()
    log = shell.driver.rm.log(OFFSETS_TOPIC, 0)
    assert log is not None and log.high_watermark == 1
    assert shell.driver.groups.hosted == {0: 0} and not shell.driver.groups.loading
    return shell


def _new_leader_epoch(shell: ScriptedShell) -> None:
    """The controller bumps the partition's leader epoch (broker 1 stays its leader)."""
    controller = shell.driver.rm.image.controller
    assert controller is not None
    current = shell.coordinator.get_partition_state(OFFSETS_TOPIC, 0)
    assert current is not None
    bumped = attrs.evolve(
        current,
        leader_epoch=current.leader_epoch + 1,
        partition_epoch=current.partition_epoch + 1,
    )
    result = shell.coordinator.compare_and_set_partition_state(
        OFFSETS_TOPIC,
        0,
        current.partition_epoch,
        bumped,
        controller_epoch=controller.controller_epoch,
    )
    assert result.ok, result


def test_a_load_started_after_the_logs_closed_reads_nothing(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    shell = _hosting_offsets(tmp_path)
    _new_leader_epoch(shell)
    shell.stop_with_a_feed_read_in_flight()
    driver = shell.driver
    with caplog.at_level(logging.INFO, logger="replog"):
        shell.release()  # the feed read in flight completes after the logs closed
        driver.on_coord_done(-1, None, None, shell.now_ms)  # any later input: nothing to do
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []
    assert driver.groups.loading == [] and driver.groups.hosted == {}
