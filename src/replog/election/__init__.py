"""replog.election: the controller's pure decisions (who leads, which ISR, where replicas go).

Sans-IO: nothing here reads a clock, draws random numbers, or touches files or sockets. Time
arrives as ``now_ms`` and randomness as arguments (``start_index``, ``replica_shift``). Each
decision returns a ``Decision`` = (new registration or ``ErrorCode``, list of ``StateChange``);
a controller driver applies it through the coordinator with compare-and-set on the partition
epoch.

Modules: ``state`` (registrations, liveness), ``partition_change`` (the builder: epochs, ELR,
elections, reassignment completion), ``broker_events`` (fence/unfence/shutdown/unclean restart),
``alter_partition`` (validating a leader's ISR proposal), ``reassignment`` (the seed-001 steps and
cancellation), ``placement`` (replica assignment), ``rebalance`` (preferred-leader balance and
admin elections), ``state_change`` (the state-change log records), ``decision``.
"""

from __future__ import annotations

from replog.election.alter_partition import (
    handle_alter_partition,
    response_error,
)
from replog.election.broker_events import (
    on_broker_fenced,
    on_broker_unclean_restart,
    on_broker_unfenced,
    on_controlled_shutdown,
)
from replog.election.decision import Decision
from replog.election.partition_change import (
    ElectionPolicy,
    LeaderElectionStrategy,
    PartitionChangeBuilder,
    ReplicaAssignment,
    create_partition,
)
from replog.election.placement import (
    InconsistentRackError,
    InvalidReplicationFactorError,
    assign_replicas,
    assign_replicas_rack_aware,
    assign_replicas_rack_unaware,
    rack_alternated_brokers,
)
from replog.election.reassignment import (
    ReassignmentProgress,
    ReassignmentStep,
    cancel_reassignment,
    next_reassignment_step,
)
from replog.election.rebalance import (
    LeaderImbalance,
    elect_leader,
    imbalanced_partitions,
    leader_imbalance,
    partitions_to_rebalance,
)
from replog.election.state import (
    BrokerRegistration,
    ClusterView,
    PartitionRegistration,
    TopicPartition,
)
from replog.election.state_change import (
    DEFAULT_REQUESTER,
    Actor,
    Phase,
    Role,
    StateChange,
    StateChangeKind,
    parse_log_line,
)

__all__ = [
    "DEFAULT_REQUESTER",
    "Actor",
    "BrokerRegistration",
    "ClusterView",
    "Decision",
    "ElectionPolicy",
    "LeaderElectionStrategy",
    "InconsistentRackError",
    "InvalidReplicationFactorError",
    "LeaderImbalance",
    "PartitionChangeBuilder",
    "PartitionRegistration",
    "Phase",
    "ReassignmentProgress",
    "ReassignmentStep",
    "ReplicaAssignment",
    "Role",
    "StateChange",
    "StateChangeKind",
    "TopicPartition",
    "assign_replicas",
    "assign_replicas_rack_aware",
    "assign_replicas_rack_unaware",
    "cancel_reassignment",
    "create_partition",
    "elect_leader",
    "handle_alter_partition",
    "imbalanced_partitions",
    "leader_imbalance",
    "next_reassignment_step",
    "on_broker_fenced",
    "on_broker_unclean_restart",
    "on_broker_unfenced",
    "on_controlled_shutdown",
    "parse_log_line",
    "partitions_to_rebalance",
    "rack_alternated_brokers",
    "response_error",
]
