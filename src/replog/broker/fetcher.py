"""``ReplicaFetcher``: one asyncio task per source broker, fetching every partition this broker
follows on it with one Fetch v12 request per round (replica_id, current_leader_epoch,
last_fetched_epoch), through the protocol's client side.

In FSYNC mode the local logs are flushed (group commit, on a worker thread) before a request
that reports their LEO goes out. Answers are applied through ``ReplicaManager.on_fetch_response``
(the ``Partition`` machine handles diverging epochs and out-of-range); an answer that may truncate
a log (an error, a diverging epoch) is applied holding the broker's storage lock, so a truncation
never races a worker-thread fsync, while plain appends go ahead during one.

A Fetch response carries no leader log end offset, so when a partition answers
OFFSET_OUT_OF_RANGE (the leader is behind us after an unclean election, or its log starts past
ours) the fetcher asks the leader with ListOffsets (as a replica: latest = its LEO, earliest = its
log start) before handing the answer to the ``Partition``, which truncates accordingly -- as
Kafka's follower does (``fetchLatestOffsetFromLeader``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from replog.broker.server import STREAM_LIMIT_BYTES
from replog.errors import ErrorCode, ProtocolError
from replog.isr import BytesSlice, EpochEndOffset, FetchRequest, FetchResponse, FollowerAction
from replog.protocol import FrameReader, RequestHeader, decode_response, encode_request
from replog.protocol import messages as m
from replog.protocol.schema import Message

if TYPE_CHECKING:
    from replog.broker.broker import Broker
    from replog.broker.replica_manager import TP

__all__ = ["ReplicaFetcher"]

_log = logging.getLogger(__name__)
FETCH_VERSION = 12
LIST_OFFSETS_VERSION = 7


def _error_code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


class ReplicaFetcher:
    """Fetches from ``leader_id`` for ``broker`` until ``stop``."""

    def __init__(self, broker: Broker, leader_id: int) -> None:
        self.broker = broker
        self.leader_id = leader_id
        self._task: asyncio.Task[None] | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._reader: asyncio.StreamReader | None = None
        self._correlation_id = 0
        self._stopped = False

    def start(self) -> None:
        """Start the fetch loop."""
        self._task = asyncio.get_running_loop().create_task(self._run())

    def cancel(self) -> None:
        """Stop at once without waiting: close the connection and cancel the loop."""
        self._stopped = True
        self._close()
        if self._task is not None:
            self._task.cancel()

    async def stop(self) -> None:
        """Cancel the loop, close the connection, and wait for the loop to end."""
        self.cancel()
        if self._task is not None:
            # gather: the loop's own end (cancelled, failed) is absorbed, but cancelling the
            # caller still cancels the caller.
            await asyncio.gather(self._task, return_exceptions=True)
        self._close()

    def _close(self) -> None:
        if self._writer is not None:
            self._writer.transport.abort()
        self._writer = self._reader = None

    async def _run(self) -> None:
        backoff_s = self.broker.config.replica_fetch_backoff_ms / 1000
        while not self._stopped:
            try:
                progressed = await self._round()
            except asyncio.CancelledError:
                raise
            except (TimeoutError, OSError, ProtocolError, EOFError) as exc:
                _log.debug("fetcher %s -> %s: %s", self.broker.broker_id, self.leader_id, exc)
                self._close()
                progressed = False
            if not progressed:
                await asyncio.sleep(backoff_s)

    async def _connect(self) -> bool:
        if self._writer is not None:
            return True
        info = self.broker.rm.brokers.get(self.leader_id)
        if info is None:
            return False
        async with asyncio.timeout(2.0):
            self._reader, self._writer = await asyncio.open_connection(
                info.host, info.port, limit=STREAM_LIMIT_BYTES
            )
        return True

    async def _round(self) -> bool:
        broker = self.broker
        if not await self._connect():
            return False
        # No storage lock: building requests reads state only, and a checkpoint-interval fsync
        # holding the lock must not stall replication.
        requests = broker.rm.fetch_requests_for(self.leader_id)
        if not requests:
            return False
        if any(r.requires_flush for _, r in requests):
            await broker.flush_logs()
        config = broker.config
        by_topic: dict[str, list[m.FetchPartition]] = {}
        for (topic, partition), r in requests:
            by_topic.setdefault(topic, []).append(
                m.FetchPartition(
                    partition=partition,
                    current_leader_epoch=r.current_leader_epoch,
                    fetch_offset=r.fetch_offset,
                    last_fetched_epoch=r.last_fetched_epoch,
                    log_start_offset=r.log_start_offset,
                    partition_max_bytes=r.max_bytes,
                )
            )
        body = m.FetchRequest(
            replica_id=broker.broker_id,
            max_wait_ms=config.replica_fetch_wait_ms_max,
            min_bytes=config.replica_fetch_min_bytes,
            max_bytes=config.replica_fetch_bytes_max,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[m.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
            forgotten_topics_data=[],
            rack_id="",
        )
        self._correlation_id += 1
        header = RequestHeader(
            api_key=m.FETCH.api_key,
            api_version=FETCH_VERSION,
            correlation_id=self._correlation_id,
            client_id=f"replica-{broker.broker_id}",
        )
        response = await self._exchange(
            encode_request(header, body), m.FETCH.api_key, FETCH_VERSION
        )
        if not isinstance(response, m.FetchResponse):
            raise ProtocolError(f"a fetch answered with {type(response).__name__}")
        leader_offsets = await self._leader_offsets_if_out_of_range(response)
        return await self._apply(dict(requests), response, leader_offsets)

    async def _leader_offsets_if_out_of_range(
        self, response: m.FetchResponse
    ) -> dict[TP, tuple[int, int]]:
        """(log start, LEO) on the leader of every partition that answered out of range."""
        out_of_range = [
            (t.topic, p.partition_index)
            for t in response.responses
            for p in t.partitions
            if p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        ]
        if not out_of_range:
            return {}
        earliest = await self._list_offsets(out_of_range, m.EARLIEST_TIMESTAMP)
        latest = await self._list_offsets(out_of_range, m.LATEST_TIMESTAMP)
        return {
            tp: (earliest[tp], latest[tp]) for tp in out_of_range if tp in earliest and tp in latest
        }

    async def _list_offsets(self, tps: list[TP], timestamp: int) -> dict[TP, int]:
        """ListOffsets as a replica (replica_id >= 0: latest is the leader's LEO, not its HW)."""
        broker = self.broker
        by_topic: dict[str, list[m.ListOffsetsPartition]] = {}
        for topic, partition in tps:
            replica = broker.rm.partition(topic, partition)
            epoch = -1 if replica is None else replica.leader_epoch
            by_topic.setdefault(topic, []).append(
                m.ListOffsetsPartition(
                    partition_index=partition, current_leader_epoch=epoch, timestamp=timestamp
                )
            )
        body = m.ListOffsetsRequest(
            replica_id=broker.broker_id,
            isolation_level=0,
            topics=[m.ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
        )
        self._correlation_id += 1
        header = RequestHeader(
            api_key=m.LIST_OFFSETS.api_key,
            api_version=LIST_OFFSETS_VERSION,
            correlation_id=self._correlation_id,
            client_id=f"replica-{broker.broker_id}",
        )
        response = await self._exchange(
            encode_request(header, body), m.LIST_OFFSETS.api_key, LIST_OFFSETS_VERSION
        )
        if not isinstance(response, m.ListOffsetsResponse):
            raise ProtocolError(f"list offsets answered with {type(response).__name__}")
        return {
            (t.name, p.partition_index): p.offset
            for t in response.topics
            for p in t.partitions
            if p.error_code == ErrorCode.NONE and p.offset >= 0
        }

    async def _exchange(self, frame: bytes, api_key: int, api_version: int) -> Message:
        assert self._writer is not None and self._reader is not None
        self._writer.write(frame)
        await self._writer.drain()
        frames = FrameReader(self.broker.config.frame_bytes_max)
        timeout_s = (
            self.broker.config.replica_fetch_wait_ms_max + self.broker.config.request_timeout_ms
        ) / 1000
        while True:
            async with asyncio.timeout(timeout_s):
                data = await self._reader.read(STREAM_LIMIT_BYTES)
            if not data:
                raise EOFError("leader closed the connection")
            got = frames.feed(data)
            if got:
                cid, body = decode_response(got[0], api_key=api_key, api_version=api_version)
                if cid != self._correlation_id:
                    raise ProtocolError(f"unexpected response correlation id {cid}")
                return body

    async def _apply(
        self,
        requests: dict[TP, FetchRequest],
        response: m.FetchResponse,
        leader_offsets: dict[TP, tuple[int, int]],
    ) -> bool:
        if leader_offsets or any(
            p.error_code or (p.diverging_epoch is not None and p.diverging_epoch.epoch >= 0)
            for t in response.responses
            for p in t.partitions
        ):
            # May truncate a log: wait for any worker-thread fsync to finish first.
            async with self.broker.storage_lock:
                return self._apply_now(requests, response, leader_offsets)
        # Appends only: no lock. A concurrent fsync covers what was appended before it began
        # (the leaders' produce path appends the same way), and waiting here for a
        # checkpoint-interval flush of a busy log would stall replication -- and with it every
        # acks=all produce -- for the whole fsync.
        return self._apply_now(requests, response, leader_offsets)

    def _apply_now(
        self,
        requests: dict[TP, FetchRequest],
        response: m.FetchResponse,
        leader_offsets: dict[TP, tuple[int, int]],
    ) -> bool:
        broker = self.broker
        progressed = True
        now_ms = broker.now_ms()
        for topic in response.responses:
            for p in topic.partitions:
                tp = (topic.topic, p.partition_index)
                request = requests.get(tp)
                if request is None:
                    continue
                records = p.records
                data = (
                    b""
                    if records is None or not isinstance(records, (bytes, bytearray, memoryview))
                    else bytes(records)
                )
                diverging = None
                if p.diverging_epoch is not None and p.diverging_epoch.epoch >= 0:
                    diverging = EpochEndOffset(
                        p.diverging_epoch.epoch, p.diverging_epoch.end_offset
                    )
                log_start_offset, log_end_offset = leader_offsets.get(tp, (p.log_start_offset, -1))
                answer = FetchResponse(
                    request_id=request.request_id,
                    error_code=_error_code(p.error_code),
                    fetch_offset=request.fetch_offset,
                    high_watermark=p.high_watermark,
                    log_start_offset=log_start_offset,
                    log_end_offset=log_end_offset,
                    records=BytesSlice(data) if data else None,
                    diverging_epoch=diverging,
                    replica_id=broker.broker_id,
                )
                outcome = broker.rm.on_fetch_response(tp, answer, now_ms)
                if outcome.action is FollowerAction.FAILED:
                    progressed = False
        broker.after_input()
        return progressed
