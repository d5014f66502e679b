"""``MetadataDelta``: what one feed batch changed in a ``MetadataImage``.

``MetadataImage.apply`` returns it, so a component acting on metadata reads the image for the
current value and the delta for what moved, instead of replaying the records itself:

- ``topics_deleted``: each topic incarnation the batch deleted, with the assignment it had (its
  topic id names the incarnation; a delete naming another incarnation deletes nothing);
- ``topics_changed``: topics created, grown or reconfigured (their new assignment is in the
  image); ``topics_reconfigured`` the subset whose configs changed (a topic created by the
  batch is not in it);
- ``partitions_changed``: each partition whose state changed, once, in the order the batch first
  changed it (the image holds the last state; a state with a lower partition epoch than the one
  held is stale and changes nothing);
- ``brokers_changed``: brokers registered, re-registered, fenced, unfenced or gone;
- ``broker_configs_changed``: broker ids whose dynamic configs changed (``ALL_BROKERS`` too);
- ``controller_changed``: the active controller changed (None included);
- ``admin_requests``: the admin-queue records of the batch, in order (they are not part of the
  image: only their routing needs them).

A topic deleted and created again in one batch is in both ``topics_deleted`` (the old
incarnation) and ``topics_changed`` (the new one); deletions are meant to be acted on first.
"""

from __future__ import annotations

import attrs

from replog.metadata.types import AdminRequestChanged, TopicAssignment
from replog.topics import TopicPartition

__all__ = ["MetadataDelta"]


@attrs.frozen
class MetadataDelta:
    """See the module docstring."""

    topics_deleted: tuple[TopicAssignment, ...] = ()
    topics_changed: frozenset[str] = frozenset()
    topics_reconfigured: frozenset[str] = frozenset()
    partitions_changed: tuple[TopicPartition, ...] = ()
    brokers_changed: frozenset[int] = frozenset()
    broker_configs_changed: frozenset[int] = frozenset()
    controller_changed: bool = False
    admin_requests: tuple[AdminRequestChanged, ...] = ()

    @property
    def image_changed(self) -> bool:
        """Whether the image differs from before the batch (admin records alone do not)."""
        return bool(
            self.topics_deleted
            or self.topics_changed
            or self.partitions_changed
            or self.brokers_changed
            or self.broker_configs_changed
            or self.controller_changed
        )


EMPTY_DELTA = MetadataDelta()
"""A batch that changed nothing."""
