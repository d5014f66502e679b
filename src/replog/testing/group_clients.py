"""The simulated consumer-group clients: members of classic-protocol groups.

``GroupClients`` runs ``GroupOptions.groups`` groups of ``members`` members each. A
``GroupMember`` behaves like a Kafka consumer's coordinator logic: FindCoordinator (v4, at a
random broker), JoinGroup (``MEMBER_ID_REQUIRED`` first, then with the id it was given),
SyncGroup (the leader assigns the main topic's partitions round robin and tags the assignment
with the generation and its own computation), Heartbeat, periodic OffsetCommit of its
partitions (with offsets from ``GroupHistory.new_commit``) and OffsetFetch of every partition
of the group. Coordinator errors send it back to FindCoordinator, rebalance and fencing errors
to JoinGroup, as Kafka's clients do. Now and then a member pauses (a long GC: no heartbeat for
longer than its session, then it goes on as if nothing happened -- its next commit carries its
old generation and must be refused) or restarts (a new member). The brokers' nemesis (crashes,
partitions, elections) moves the coordinators under them: ``__consumer_offsets`` is a
replicated topic of the cluster like any other.

Every random choice of these clients, and every fault and delay of their messages, comes from
their own generator (``groups-<seed>``, and ``SimNetwork.rngs``), so the seeds' other draws are
as before; the brokers' extra work (the offsets topic's replication) still shifts schedules.

The members see the simulation through ``GroupClientsHost``, the members of ``Simulation`` they
use.
"""

from __future__ import annotations

import random
from typing import Any, Protocol

import attrs

from replog.errors import ErrorCode
from replog.groups import GroupConfig
from replog.protocol import messages as m
from replog.protocol.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    TopicPartitions,
)
from replog.simkit.net import SimNetwork
from replog.testing.clients import Rpc, code_of
from replog.testing.group_checks import CommitAttempt, GroupHistory
from replog.testing.options import SimOptions
from replog.testing.sim_ports import SimCore
from replog.testing.workload import TOPIC, ClientMetadataCache

__all__ = [
    "GROUP_NODE",
    "GROUP_NODES",
    "GroupClients",
    "GroupClientsHost",
    "GroupMember",
    "GroupOptions",
]

GROUP_NODE = 500
GROUP_NODES = frozenset(range(GROUP_NODE, GROUP_NODE + 40))
PROTOCOL_TYPE = "consumer"
ASSIGNOR = "roundrobin"
BACKOFF_MS = 30
COORDINATOR_ERRORS = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    }
)
REJOIN_ERRORS = frozenset(
    {ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID}
)


@attrs.frozen
class GroupOptions:
    """What one seed's group clients do, drawn from ``group-options-<seed>``."""

    groups: int
    members: int
    offsets_partitions: int
    session_ms: int
    heartbeat_ms: int
    rebalance_ms: int
    initial_delay_ms: int
    commit_interval_ms: int
    fetch_interval_ms: int
    #: per member and heartbeat: the chance it pauses, and that it restarts
    pause_rate: float
    restart_rate: float

    @classmethod
    def draw(cls, seed: int) -> GroupOptions:
        """The seed's group options (a generator of their own)."""
        rng = random.Random(f"group-options-{seed}")
        session_ms = rng.choice((500, 800, 1200))
        return cls(
            groups=rng.choice((1, 2)),
            members=rng.choice((2, 3)),
            offsets_partitions=rng.choice((1, 2, 3)),
            session_ms=session_ms,
            heartbeat_ms=session_ms // 4,
            rebalance_ms=rng.choice((300, 600)),
            initial_delay_ms=rng.choice((0, 50, 150)),
            commit_interval_ms=rng.choice((40, 80)),
            fetch_interval_ms=rng.choice((60, 120)),
            pause_rate=rng.choice((0.0, 0.01, 0.03)),
            restart_rate=rng.choice((0.0, 0.005, 0.01)),
        )

    def settle_bound_ms(self, opts: SimOptions) -> int:
        """How long after the heal every group must be stable with a commit of every
        partition acknowledged: the leaders are back (``leader_bound_ms``, which covers the
        coordinator's partition and its load), a request lost before the heal has timed out
        (``client_timeout_ms``), a member gone with the faults is evicted (a session), the
        rebalance waits for the others to rejoin (its timeout and the initial delay), and two
        commit rounds go through."""
        return (
            opts.leader_bound_ms
            + opts.client_timeout_ms
            + self.session_ms
            + self.rebalance_ms
            + self.initial_delay_ms
            + 2 * self.commit_interval_ms
        )

    def group_config(self) -> GroupConfig:
        """The brokers' coordinator settings for this seed."""
        return GroupConfig(
            session_timeout_ms_min=50,
            session_timeout_ms_max=60_000,
            initial_rebalance_delay_ms=self.initial_delay_ms,
            offsets_topic_partitions=self.offsets_partitions,
        )


class GroupClientsHost(SimCore, Protocol):
    """What the group clients use of the simulation."""

    @property
    def group_opts(self) -> GroupOptions:
        """What the seed's group clients do."""

    @property
    def phase(self) -> str:
        """``safety`` (members pause and restart) or ``liveness``."""

    @property
    def net(self) -> SimNetwork:
        """The network (the members' nodes draw from the clients' generator)."""

    @property
    def rpc(self) -> Rpc:
        """The clients' wire."""

    @property
    def view(self) -> ClientMetadataCache:
        """The clients' metadata (the main topic's partition count)."""


class GroupClients:
    """Every group member of the run (see the module docstring)."""

    def __init__(self, sim: GroupClientsHost) -> None:
        self.sim = sim
        self.opts = sim.group_opts
        self.rng = random.Random(f"groups-{sim.opts.seed}")
        self.history = GroupHistory(sim)
        self.members: list[GroupMember] = []
        node = GROUP_NODE
        for g in range(self.opts.groups):
            for i in range(self.opts.members):
                self.members.append(GroupMember(self, f"group-{g}", f"member-{g}-{i}", node))
                sim.net.rngs[node] = self.rng
                node += 1

    def start(self, delay_ms: int) -> None:
        """Start every member (each at its own moment)."""
        for member in self.members:
            member.start(delay_ms + self.rng.randint(0, 100))

    def resume(self) -> None:
        """End every member's pause (the heal)."""
        for member in self.members:
            member.paused_until_ms = min(member.paused_until_ms, self.sim.now_ms)

    def settled(self, since_ms: int, partitions: int) -> bool:
        """Liveness: every group is stable (all its members in one generation) and has had a
        commit of every partition of the main topic acknowledged since ``since_ms``."""
        for g in range(self.opts.groups):
            group = f"group-{g}"
            members = [member for member in self.members if member.group == group]
            if any(member.state != "stable" for member in members):
                return False
            if len({member.generation for member in members}) != 1:
                return False
            for p in range(partitions):
                acked = self.history.acked.get((group, (TOPIC, p)), [])
                if not acked or acked[-1].sent_ms < since_ms:
                    return False
        return True

    def status(self) -> str:
        """Every member's state, for a liveness violation."""
        return ", ".join(
            f"{member.client_id}: {member.state} generation {member.generation} "
            f"coordinator {member.coordinator} partitions {member.partitions}"
            for member in self.members
        )

    def jitter(self, interval_ms: int) -> int:
        """``interval_ms`` +- 25 %, from the clients' generator."""
        spread = max(1, interval_ms // 4)
        return interval_ms + self.rng.randint(-spread, spread)


class GroupMember:
    """One member of one group (see the module docstring)."""

    def __init__(self, clients: GroupClients, group: str, client_id: str, node: int) -> None:
        self.clients = clients
        self.sim = clients.sim
        self.group = group
        self.client_id = client_id
        self.node = node
        self.coordinator: int | None = None
        self.member_id = ""
        self.generation = -1
        self.state = "join"  # join -> (joining) -> syncing -> stable
        self.partitions: list[int] = []
        #: how many partitions the main topic had when this generation was assigned
        self.assigned_count = 0
        self.paused_until_ms = 0
        self.incarnation = 0
        self._finding = False
        self._joining = False
        self._committing = False
        self._fetching = False
        self._heartbeating = False
        self._next_heartbeat_ms = 0
        self._next_commit_ms = 0
        self._next_fetch_ms = 0
        self._computations = 0

    # ------------------------------------------------------------------ the loop

    def start(self, delay_ms: int) -> None:
        """Step every few milliseconds while the run lasts."""
        self.sim.after(delay_ms, self._step)

    def _step(self) -> None:
        sim, clients = self.sim, self.clients
        sim.after(clients.jitter(20), self._step)
        now = sim.now_ms
        if now < self.paused_until_ms:
            return
        if self.coordinator is None:
            self._find()
            return
        if self.state == "stable" and self.sim.view.partition_counts.get(TOPIC, 0) > (
            self.assigned_count
        ):
            self.state = "join"  # partitions were added: rebalance, as a Kafka consumer does
        if self.state == "join" and not self._joining:
            self._join()
        beating = self.state in ("stable", "syncing")  # Kafka's heartbeat thread runs on
        if beating and now >= self._next_heartbeat_ms and not self._heartbeating:
            self._next_heartbeat_ms = now + clients.opts.heartbeat_ms
            self._heartbeat()
            self._chaos()
        if self.state == "stable" and now >= self._next_commit_ms and not self._committing:
            self._next_commit_ms = now + clients.jitter(clients.opts.commit_interval_ms)
            self._commit()
        if now >= self._next_fetch_ms and not self._fetching:
            self._next_fetch_ms = now + clients.jitter(clients.opts.fetch_interval_ms)
            self._fetch()

    def _chaos(self) -> None:
        clients = self.clients
        if self.sim.phase != "safety":
            return
        draw = clients.rng.random()
        if draw < clients.opts.pause_rate:
            pause_ms = clients.rng.randint(clients.opts.session_ms, 3 * clients.opts.session_ms)
            self.paused_until_ms = self.sim.now_ms + pause_ms
            self.sim.trace(f"{self.client_id} pauses for {pause_ms} ms")
        elif draw < clients.opts.pause_rate + clients.opts.restart_rate:
            self.sim.trace(f"{self.client_id} restarts")
            self.incarnation += 1
            self.member_id, self.generation, self.state = "", -1, "join"
            self.partitions = []
            self.coordinator = None
            self._finding = self._joining = self._committing = False
            self._fetching = self._heartbeating = False

    def _call(self, body: Any, answer: Any, *, timeout_ms: int | None = None) -> None:
        sim = self.sim
        broker = self.coordinator
        incarnation = self.incarnation

        def on_answer(response: Any) -> None:
            if incarnation == self.incarnation:
                answer(response)

        if broker is None:
            # the coordinator was lost while the step before was in flight (a heartbeat's
            # NOT_COORDINATOR during a join): the request fails as unsent, so the member does
            # not wait for an answer that cannot come (it was left syncing for good)
            sim.after(0, lambda: on_answer(None))
            return

        sim.rpc.call(
            self.node,
            broker,
            body,
            on_answer,
            client_id=self.client_id,
            timeout_ms=timeout_ms or sim.opts.client_timeout_ms,
            duplicable=False,  # one TCP connection: no duplicates
        )

    def _lost_coordinator(self) -> None:
        self.coordinator = None

    def _on_error(self, error: ErrorCode) -> None:
        """What a member does after an error of a membership or commit request."""
        if error in COORDINATOR_ERRORS:
            self._lost_coordinator()
        if error is ErrorCode.UNKNOWN_MEMBER_ID:
            self.member_id, self.generation = "", -1
        if error in REJOIN_ERRORS:
            self.state = "join"

    # ------------------------------------------------------------------ FindCoordinator

    def _find(self) -> None:
        sim = self.sim
        if self._finding:
            return
        self._finding = True
        broker = self.clients.rng.randint(1, sim.opts.brokers)
        body = m.FindCoordinatorRequest(key_type=0, coordinator_keys=[self.group])
        incarnation = self.incarnation

        def on_answer(response: Any) -> None:
            if incarnation != self.incarnation:
                return
            self._finding = False
            if not isinstance(response, m.FindCoordinatorResponse):
                return
            found = response.coordinators[0]
            sim.trace(f"{self.client_id} coordinator: {found.node_id} {found.error_code}")
            if code_of(found.error_code) is ErrorCode.NONE:
                self.coordinator = found.node_id

        sim.rpc.call(
            self.node,
            broker,
            body,
            on_answer,
            client_id=self.client_id,
            timeout_ms=sim.opts.request_timeout_ms,
            duplicable=False,
        )

    # ------------------------------------------------------------------ join and sync

    def _join(self) -> None:
        opts = self.clients.opts
        self._joining = True
        self.state = "joining"
        subscription = ConsumerProtocolSubscription(topics=[TOPIC]).encode()
        body = m.JoinGroupRequest(
            group_id=self.group,
            session_timeout_ms=opts.session_ms,
            rebalance_timeout_ms=opts.rebalance_ms,
            member_id=self.member_id,
            protocol_type=PROTOCOL_TYPE,
            protocols=[m.JoinGroupRequestProtocol(name=ASSIGNOR, metadata=subscription)],
        )
        timeout_ms = opts.rebalance_ms + opts.initial_delay_ms + self.sim.opts.client_timeout_ms
        self._call(body, self._on_join, timeout_ms=timeout_ms)

    def _on_join(self, response: Any) -> None:
        self._joining = False
        if not isinstance(response, m.JoinGroupResponse):
            self.state = "join"
            self._lost_coordinator()
            return
        error = code_of(response.error_code)
        self.sim.trace(f"{self.client_id} join: {error.name} generation {response.generation_id}")
        if error is ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id, self.state = response.member_id, "join"
            return
        if error is not ErrorCode.NONE:
            self.state = "join"
            self._on_error(error)
            return
        self.member_id, self.generation = response.member_id, response.generation_id
        self.state = "syncing"
        assignments = []
        if response.leader == self.member_id:
            assignments = self._assign(sorted(member.member_id for member in response.members))
        body = m.SyncGroupRequest(
            group_id=self.group,
            generation_id=self.generation,
            member_id=self.member_id,
            protocol_type=PROTOCOL_TYPE,
            protocol_name=ASSIGNOR,
            assignments=assignments,
        )
        generation = self.generation
        self._call(
            body,
            lambda answer: self._on_sync(generation, answer),
            timeout_ms=self.clients.opts.session_ms,
        )

    def _assign(self, members: list[str]) -> list[m.SyncGroupRequestAssignment]:
        """The leader's round-robin assignment of the main topic's partitions, tagged
        ``<generation>/<leader>/<computation>/<partition count>``."""
        self._computations += 1
        count = max(1, self.sim.view.partition_counts.get(TOPIC, 0))
        tag = f"{self.generation}/{self.member_id}/{self._computations}/{count}".encode()
        out = []
        for index, member_id in enumerate(members):
            mine = [p for p in range(count) if p % len(members) == index]
            assignment = ConsumerProtocolAssignment(
                assigned_partitions=[TopicPartitions(topic=TOPIC, partitions=mine)],
                user_data=tag,
            )
            out.append(
                m.SyncGroupRequestAssignment(member_id=member_id, assignment=assignment.encode())
            )
        return out

    def _on_sync(self, generation: int, response: Any) -> None:
        if self.state != "syncing" or generation != self.generation:
            return
        if not isinstance(response, m.SyncGroupResponse):
            self.state = "join"
            self._lost_coordinator()
            return
        error = code_of(response.error_code)
        self.sim.trace(f"{self.client_id} sync generation {generation}: {error.name}")
        if error is not ErrorCode.NONE:
            self.state = "join"
            self._on_error(error)
            return
        if not response.assignment:  # the leader assigns every member of its generation
            self.clients.history.on_sync(self.group, generation, "", self.member_id)
            return
        assignment = ConsumerProtocolAssignment.decode(response.assignment)
        tag = (assignment.user_data or b"").decode()
        self.clients.history.on_sync(self.group, generation, tag, self.member_id)
        self.partitions = sorted(
            p
            for tps in assignment.assigned_partitions
            if tps.topic == TOPIC
            for p in tps.partitions
        )
        self.assigned_count = int(tag.rsplit("/", 1)[-1])
        self.state = "stable"
        self._next_heartbeat_ms = self.sim.now_ms + self.clients.opts.heartbeat_ms
        self._next_fetch_ms = self.sim.now_ms  # where to start: the committed offsets

    # ------------------------------------------------------------------ heartbeat

    def _heartbeat(self) -> None:
        self._heartbeating = True
        body = m.HeartbeatRequest(
            group_id=self.group, generation_id=self.generation, member_id=self.member_id
        )
        self._call(body, self._on_heartbeat, timeout_ms=self.clients.opts.session_ms // 3)

    def _on_heartbeat(self, response: Any) -> None:
        self._heartbeating = False
        if not isinstance(response, m.HeartbeatResponse):
            self._lost_coordinator()
            return
        error = code_of(response.error_code)
        if error is not ErrorCode.NONE and self.state in ("stable", "syncing"):
            self.sim.trace(f"{self.client_id} heartbeat generation {self.generation}: {error.name}")
            self._on_error(error)

    # ------------------------------------------------------------------ offsets

    def _commit(self) -> None:
        if not self.partitions:
            return
        history = self.clients.history
        attempts = [
            history.new_commit(
                self.group,
                (TOPIC, p),
                self.generation,
                self.member_id,
                self.clients.rng.randint(1, 3),
            )
            for p in self.partitions
        ]
        body = m.OffsetCommitRequest(
            group_id=self.group,
            generation_id_or_member_epoch=self.generation,
            member_id=self.member_id,
            topics=[
                m.OffsetCommitRequestTopic(
                    name=TOPIC,
                    partitions=[
                        m.OffsetCommitRequestPartition(
                            partition_index=a.tp[1],
                            committed_offset=a.offset,
                            committed_metadata="",
                        )
                        for a in attempts
                    ],
                )
            ],
        )
        self._committing = True
        self._call(
            body,
            lambda answer: self._on_commit(attempts, answer),
            timeout_ms=self.sim.opts.request_timeout_ms,
        )

    def _on_commit(self, attempts: list[CommitAttempt], response: Any) -> None:
        self._committing = False
        history = self.clients.history
        if not isinstance(response, m.OffsetCommitResponse):
            self._lost_coordinator()
            return
        errors = {
            p.partition_index: code_of(p.error_code)
            for t in response.topics
            for p in t.partitions
            if t.name == TOPIC
        }
        worst = ErrorCode.NONE
        for attempt in attempts:
            error = errors.get(attempt.tp[1], ErrorCode.UNKNOWN_SERVER_ERROR)
            fenced = error in (ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID)
            history.on_commit_answer(attempt, error is ErrorCode.NONE, fenced=fenced)
            if error is not ErrorCode.NONE:
                worst = error
        self.sim.trace(f"{self.client_id} commit generation {attempts[0].generation}: {worst.name}")
        if worst is not ErrorCode.NONE and self.state == "stable":
            self._on_error(worst)

    def _fetch(self) -> None:
        count = self.sim.view.partition_counts.get(TOPIC, 0)
        if count == 0:
            return
        partitions = list(range(count))
        body = m.OffsetFetchRequest(
            groups=[
                m.OffsetFetchRequestGroup(
                    group_id=self.group,
                    topics=[m.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=partitions)],
                )
            ],
        )
        self._fetching = True
        sent_ms, broker = self.sim.now_ms, self.coordinator
        self._call(
            body,
            lambda answer: self._on_fetch(sent_ms, broker or -1, answer),
            timeout_ms=self.sim.opts.request_timeout_ms,
        )

    def _on_fetch(self, sent_ms: int, broker: int, response: Any) -> None:
        self._fetching = False
        if not isinstance(response, m.OffsetFetchResponse):
            self._lost_coordinator()
            return
        answer = response.groups[0]
        error = code_of(answer.error_code)
        if error is not ErrorCode.NONE:
            if error in COORDINATOR_ERRORS:
                self._lost_coordinator()
            return
        for topic in answer.topics:
            for part in topic.partitions:
                if code_of(part.error_code) is ErrorCode.NONE:
                    self.clients.history.on_fetch(
                        self.group,
                        (topic.name, part.partition_index),
                        part.committed_offset,
                        sent_ms,
                        broker,
                    )
