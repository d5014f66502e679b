"""Kafka's sentinels for leader epochs, shared by the storage engine (``replog.log``'s epoch
cache), the replication core (``replog.isr``) and the quorum: one definition every layer may
import, because this module imports nothing.

An OffsetsForLeaderEpoch answer for an epoch the log does not know is
``(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)``; a fetch that has no last fetched epoch sends
``UNDEFINED_EPOCH``.
"""

from __future__ import annotations

__all__ = ["UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET"]

UNDEFINED_EPOCH = -1
"""No leader epoch (Kafka's ``UNDEFINED_EPOCH``)."""

UNDEFINED_EPOCH_OFFSET = -1
"""No end offset for an epoch (Kafka's ``UNDEFINED_EPOCH_OFFSET``)."""
