"""Group coordinator benchmark: ``python -m benchmarks.groups``.

Prints one JSON line per case: how many requests per second one ``GroupCoordinatorShard``
handles once its groups are Stable, alternating a Heartbeat and an OffsetCommit per member
(each commit's write reported written at once), with ``next_deadline_ms()`` asked after every
input as a broker's event loop would. Cases vary the number of groups and members per group.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time

from replog.errors import ErrorCode
from replog.groups import Effects, GroupConfig, GroupCoordinatorShard
from replog.protocol.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)


class _Owner:
    """Completes every write at once; counts nothing but time."""

    def __init__(self) -> None:
        suffixes = (str(n) for n in itertools.count())
        self.shard = GroupCoordinatorShard(
            0,
            config=GroupConfig(initial_rebalance_delay_ms=0),
            member_id_suffix=lambda: next(suffixes),
            now_ms=0,
        )
        self.ids = itertools.count()
        self.now_ms = 0

    def run(self, effects: Effects) -> None:
        for write in effects.writes:
            done = self.shard.on_write_complete(write.write_id, ErrorCode.NONE, now_ms=self.now_ms)
            self.run(done)
        self.shard.next_deadline_ms()


def _stable_groups(owner: _Owner, groups: int, members: int) -> None:
    protocols = [JoinGroupRequestProtocol(name="range", metadata=b"m")]
    for g in range(groups):
        for _ in range(members):
            request = JoinGroupRequest(
                group_id=f"group-{g}",
                session_timeout_ms=30_000,
                rebalance_timeout_ms=60_000,
                protocol_type="consumer",
                protocols=protocols,
            )
            owner.run(
                owner.shard.on_join_group(
                    next(owner.ids),
                    request,
                    api_version=3,
                    client_id="c",
                    client_host="h",
                    now_ms=owner.now_ms,
                )
            )
    owner.now_ms += 1
    owner.run(owner.shard.on_tick(owner.now_ms))
    for g in range(groups):
        group = owner.shard.group(f"group-{g}")
        assert group is not None
        for member_id in list(group.members):
            assignments = []
            if group.is_leader(member_id):
                assignments = [
                    SyncGroupRequestAssignment(member_id=m, assignment=b"a") for m in group.members
                ]
            request = SyncGroupRequest(
                group_id=group.group_id,
                generation_id=group.generation_id,
                member_id=member_id,
                assignments=assignments,
            )
            owner.run(
                owner.shard.on_sync_group(
                    next(owner.ids), request, api_version=3, now_ms=owner.now_ms
                )
            )


def measure(groups: int, members: int, rounds: int) -> float:
    """Requests per second for ``groups`` x ``members`` over ``rounds`` rounds."""
    owner = _Owner()
    _stable_groups(owner, groups, members)
    shard = owner.shard
    count = 0
    started = time.perf_counter()
    for round_ in range(rounds):
        owner.now_ms += 1_000
        for g in range(groups):
            group = shard.group(f"group-{g}")
            assert group is not None
            for member_id in list(group.members):
                heartbeat = HeartbeatRequest(
                    group_id=group.group_id, generation_id=group.generation_id, member_id=member_id
                )
                owner.run(shard.on_heartbeat(next(owner.ids), heartbeat, now_ms=owner.now_ms))
                partition = OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=round_, committed_metadata=""
                )
                commit = OffsetCommitRequest(
                    group_id=group.group_id,
                    generation_id_or_member_epoch=group.generation_id,
                    member_id=member_id,
                    topics=[OffsetCommitRequestTopic(name="t", partitions=[partition])],
                )
                owner.run(shard.on_offset_commit(next(owner.ids), commit, now_ms=owner.now_ms))
                count += 2
        owner.run(shard.on_tick(owner.now_ms))
    return count / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    for groups, members in [(10, 10), (100, 10), (10, 100), (1, 1000)]:
        rate = measure(groups, members, args.rounds)
        case = {"case": "heartbeat+commit", "groups": groups, "members_per_group": members}
        print(json.dumps({**case, "requests_per_s": round(rate)}), flush=True)


if __name__ == "__main__":
    main()
