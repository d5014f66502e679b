"""replog.controller: the controller role of a broker, driving ``replog.election``'s machine.

``ControllerService`` (``service.py``) campaigns for the role, rebuilds the pure
``ControllerMachine`` from a coordinator snapshot and applies its decisions with the controller
epoch. ``alter_partition.py`` is the channel partition leaders use to reach it.

AlterPartition channel. A partition leader (``replog.isr``) proposes ISR changes as
``replog.metadata.types.AlterPartition`` values. The broker runtime stamps its own incarnation on
one and queues it, as it is, for ``CONTROLLER_TARGET`` (``submit_admin_request``); it stays
queued across controller failovers. The controller validates it
(``election.handle_alter_partition``, in KRaft's order), compare-and-sets the partition
state, and completes the request with the error code as the outcome and an
``AlterPartitionResult`` (the resulting or, on a rejection, current leader, leader epoch,
partition epoch and ISR) as the result. The leader follows the feed, and on
``AdminRequestChanged(COMPLETED)`` for its request hands ``alter_partition_result(change)`` to
its partition. On success the new ``PartitionChanged`` record precedes the completion in the
feed.
"""

from __future__ import annotations

from replog.controller.alter_partition import (
    alter_partition_result,
    submit_alter_partition,
)
from replog.controller.service import (
    CONFLICT_RETRIES_MAX,
    ControllerRoleState,
    ControllerService,
    random_placement_start,
)
from replog.election.controller import (
    ControllerConfig,
    ControllerMachine,
    TopicPolicy,
    fixed_placement_start,
)

__all__ = [
    "CONFLICT_RETRIES_MAX",
    "ControllerConfig",
    "ControllerMachine",
    "ControllerRoleState",
    "ControllerService",
    "TopicPolicy",
    "alter_partition_result",
    "fixed_placement_start",
    "random_placement_start",
    "submit_alter_partition",
]
