"""A leader's parked follower fetches on a real ``BrokerDriver`` in virtual time: a move of the
HW alone wakes the consumers' long polls, never the followers' (a follower reads up to the LEO,
so reading its fetch again could only find nothing and park it again)."""

from __future__ import annotations

from typing import Any

from replog.broker.driver.convert import follower_fetch_request
from replog.isr import PartitionFetchRequest
from replog.log import encode_batch
from replog.metadata.types import PartitionState
from replog.protocol import RequestHeader
from replog.protocol import messages as m

from .shell import ScriptedShell

WAIT_MS = 10_000


def _leading(tmp_path: Any) -> ScriptedShell:
    """Broker 1 leading ``t``-0 (replicas and ISR 1, 2, 3) with one record, HW 0."""
    shell = ScriptedShell(tmp_path, request_timeout_ms=60_000)
    shell.start()
    controller = shell.driver.rm.image.controller
    assert controller is not None
    state = PartitionState(replicas=(1, 2, 3), leader=1, leader_epoch=0, isr=(1, 2, 3))
    shell.coordinator.create_topic(
        "t", [[1, 2, 3]], controller_epoch=controller.controller_epoch, initial_states=[state]
    )
    for _ in range(30):  # past a metadata poll
        shell.tick(20)
    replica = shell.driver.rm.partition("t", 0)
    assert replica is not None and replica.is_leader
    batch = encode_batch([b"x"], base_timestamp=shell.clock.wall_ms())
    shell.driver.rm.produce("t", 0, batch, 1, shell.now_ms)
    shell.driver.after_input()
    shell.run()
    assert replica.high_watermark == 0
    return shell


def _fetch(shell: ScriptedShell, conn_id: int, replica_id: int, offset: int) -> None:
    """Connection ``conn_id`` sends a long-polling Fetch of ``t``-0 from ``offset``."""
    request = PartitionFetchRequest(
        replica_id=replica_id, fetch_offset=offset, current_leader_epoch=0
    )
    body = follower_fetch_request(
        replica_id, [(("t", 0), request)], max_wait_ms=WAIT_MS, min_bytes=1, max_bytes=1 << 20
    )
    header = RequestHeader(api_key=m.FETCH.api_key, api_version=12, correlation_id=conn_id)
    shell.driver.on_request(conn_id, header, body, shell.now_ms)
    shell.run()


def test_a_hw_move_wakes_the_consumer_long_poll_but_not_a_parked_follower_fetch(
    tmp_path: Any,
) -> None:
    shell = _leading(tmp_path)
    replica = shell.driver.rm.partition("t", 0)
    assert replica is not None
    _fetch(shell, 2, 2, 1)  # follower 2 has the record: nothing more to read, it parks
    parked_at_ms = shell.now_ms
    _fetch(shell, 10, -1, 0)  # a consumer: nothing under the HW yet, it parks
    assert shell.responses == {}
    shell.clock.advance(100)
    _fetch(shell, 3, 3, 1)  # follower 3 reports offset 1: the HW moves to 1
    assert replica.high_watermark == 1
    assert 10 in shell.responses  # the consumer gets its record at once
    assert 2 not in shell.responses and 3 not in shell.responses
    follower = replica.replica_state(2)
    assert follower is not None
    assert follower.last_fetch_ms == parked_at_ms  # its fetch was not read again


def test_new_data_still_completes_a_parked_follower_fetch(tmp_path: Any) -> None:
    shell = _leading(tmp_path)
    _fetch(shell, 2, 2, 1)
    assert 2 not in shell.responses
    batch = encode_batch([b"y"], base_timestamp=shell.clock.wall_ms())
    shell.driver.rm.produce("t", 0, batch, 1, shell.now_ms)
    shell.driver.after_input()
    shell.run()
    assert 2 in shell.responses
