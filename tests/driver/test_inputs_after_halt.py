"""A halted broker takes no more inputs: what the coordinator or another broker answers after
``halt`` (the shell still awaits the unregistration then) is dropped, so nothing is applied to
logs that are closing or closed. Before, a metadata feed read in flight when serving stopped
was applied after ``close_logs``: a new leader epoch of a partition was written to the closed
log's epoch cache."""

from __future__ import annotations

import logging
from typing import Any

import attrs
import pytest

from replog.metadata.types import PartitionState

from .shell import ScriptedShell


def test_a_feed_read_that_completes_after_the_halt_is_not_applied(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    shell = ScriptedShell(tmp_path)
    shell.start()
    controller = shell.driver.rm.image.controller
    assert controller is not None
    state = PartitionState(replicas=(1,), leader=1, leader_epoch=0, isr=(1,))
    shell.coordinator.create_topic(
        "t", [[1]], controller_epoch=controller.controller_epoch, initial_states=[state]
    )
    for _ in range(30):  # past a metadata poll
        shell.tick(20)
    replica = shell.driver.rm.partition("t", 0)
    assert replica is not None and replica.is_leader and replica.leader_epoch == 0
    current = shell.coordinator.get_partition_state("t", 0)
    assert current is not None
    bumped = attrs.evolve(current, leader_epoch=1, partition_epoch=current.partition_epoch + 1)
    assert shell.coordinator.compare_and_set_partition_state(
        "t", 0, current.partition_epoch, bumped, controller_epoch=controller.controller_epoch
    ).ok
    shell.stop_with_a_feed_read_in_flight()
    with caplog.at_level(logging.INFO, logger="replog"):
        shell.release()  # the feed read in flight completes after the logs closed
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []
    assert replica.leader_epoch == 0, "a result that came after the halt was applied"
