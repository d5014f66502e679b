"""replog.controller: the controller role of a broker, driving ``replog.election``'s machine.

``ControllerService`` (``service.py``) campaigns for the role, rebuilds the pure
``ControllerMachine`` from a coordinator snapshot and applies its decisions with the controller
epoch. ``alter_partition.py`` is the channel partition leaders use to reach it.

AlterPartition channel. A partition leader (``replog.isr``) proposes ISR changes as
``AlterPartitionRequest`` values. The broker runtime turns one into an ``AlterPartition`` admin
payload (``alter_partition_payload``) and queues it for ``CONTROLLER_TARGET`` with
``submit_admin_request``; it stays queued across controller failovers. The controller validates
it (``election.handle_alter_partition``, the reference's order), compare-and-sets the partition
state, and completes the request: the outcome is the error code, the message holds the
resulting (or, on a rejection, current) leader, leader epoch, partition epoch and ISR. The
leader follows the feed, and on ``AdminRequestChanged(COMPLETED)`` for its request turns it into
an ``AlterPartitionResponse`` with ``alter_partition_response``. On success the new
``PartitionChanged`` record precedes the completion in the feed.
"""

from __future__ import annotations

from replog.controller.alter_partition import (
    alter_partition_payload,
    alter_partition_response,
    submit_alter_partition,
)
from replog.controller.service import (
    CONFLICT_RETRIES_MAX,
    ControllerRole,
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
    "ControllerRole",
    "ControllerService",
    "TopicPolicy",
    "alter_partition_payload",
    "alter_partition_response",
    "fixed_placement_start",
    "random_placement_start",
    "submit_alter_partition",
]
