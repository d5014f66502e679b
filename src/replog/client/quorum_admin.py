"""The metadata quorum as Kafka's ``describeMetadataQuorum`` shows it: DescribeQuorum (key 55)
asked of the quorum's voters (``replog controller`` processes, or brokers in combined mode: the
addresses of ``controller_voters``), as ``kafka-metadata-quorum --bootstrap-controller`` does.

Each voter is asked in turn until one leads (a follower answers NOT_LEADER_OR_FOLLOWER); the
leader's answer is the quorum's epoch, high watermark and every voter's log end with its last
fetch and caught-up times (wall clock ms, -1 unknown). ``QuorumUnavailableError`` when no voter
answers as leader.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from replog.client._sync import LoopThread
from replog.client.connection import BrokerConnection, parse_bootstrap
from replog.client.errors import ConnectionLostError
from replog.errors import ErrorCode, ProtocolError, ReplogError, error_name
from replog.protocol.messages import (
    METADATA_TOPIC,
    DescribeQuorumPartition,
    DescribeQuorumReplicaState,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    DescribeQuorumTopic,
)

__all__ = [
    "QuorumDescription",
    "QuorumUnavailableError",
    "VoterState",
    "adescribe_metadata_quorum",
    "describe_metadata_quorum",
]


class QuorumUnavailableError(ReplogError):
    """No voter answered DescribeQuorum as the quorum's leader."""


@attrs.frozen(kw_only=True)
class VoterState:
    """One replica of the metadata log as the leader sees it."""

    voter_id: int
    log_end_offset: int
    last_fetch_timestamp: int = -1
    last_caught_up_timestamp: int = -1


@attrs.frozen(kw_only=True)
class QuorumDescription:
    """The metadata quorum: who leads at which epoch, its high watermark, each voter (the
    leader first) and the observers (none: replog's brokers read the metadata through the
    quorum's RPC, not as Raft observers)."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[VoterState, ...]
    observers: tuple[VoterState, ...] = ()

    @property
    def max_follower_lag(self) -> int:
        """The largest gap between the leader's log end and a voter's."""
        leader = next((v for v in self.voters if v.voter_id == self.leader_id), None)
        if leader is None:
            return 0
        return max((leader.log_end_offset - v.log_end_offset for v in self.voters), default=0)


async def adescribe_metadata_quorum(
    controllers: str | Sequence[str], *, timeout_ms: int = 10_000
) -> QuorumDescription:
    """Ask the voters at ``controllers`` (``host:port,...``) until the leader answers."""
    request = DescribeQuorumRequest(
        topics=[
            DescribeQuorumTopic(
                topic_name=METADATA_TOPIC, partitions=[DescribeQuorumPartition(partition_index=0)]
            )
        ]
    )
    problems: list[str] = []
    for host, port in parse_bootstrap(controllers):
        try:
            conn = await BrokerConnection.open(
                host, port, connect_timeout_ms=timeout_ms, request_timeout_ms=timeout_ms
            )
        except (ConnectionLostError, ProtocolError, OSError) as exc:
            problems.append(f"{host}:{port}: {exc}")
            continue
        try:
            answer = await conn.request(request, DescribeQuorumResponse)
        except (ReplogError, OSError, TimeoutError) as exc:
            problems.append(f"{host}:{port}: {exc}")
            continue
        finally:
            await conn.close()
        if answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
            problems.append(f"{host}:{port}: not the leader")
            continue
        if answer.error_code != ErrorCode.NONE or not answer.topics:
            problems.append(f"{host}:{port}: {error_name(answer.error_code)}")
            continue
        part = answer.topics[0].partitions[0]
        if part.error_code != ErrorCode.NONE:
            problems.append(f"{host}:{port}: {error_name(part.error_code)}")
            continue
        return QuorumDescription(
            leader_id=part.leader_id,
            leader_epoch=part.leader_epoch,
            high_watermark=part.high_watermark,
            voters=tuple(_state(v) for v in part.current_voters),
            observers=tuple(_state(v) for v in part.observers),
        )
    raise QuorumUnavailableError("no voter answered as the quorum's leader: " + "; ".join(problems))


def describe_metadata_quorum(
    controllers: str | Sequence[str], *, timeout_ms: int = 10_000
) -> QuorumDescription:
    """The synchronous ``adescribe_metadata_quorum`` (on a background event-loop thread)."""
    loop = LoopThread("replog-quorum-admin")
    try:
        return loop.run(adescribe_metadata_quorum(controllers, timeout_ms=timeout_ms))
    finally:
        loop.stop()


def _state(replica: DescribeQuorumReplicaState) -> VoterState:
    return VoterState(
        voter_id=replica.replica_id,
        log_end_offset=replica.log_end_offset,
        last_fetch_timestamp=replica.last_fetch_timestamp,
        last_caught_up_timestamp=replica.last_caught_up_timestamp,
    )
