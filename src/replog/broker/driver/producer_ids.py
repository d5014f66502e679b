"""``ProducerIdManager``: the producer ids one broker hands to idempotent producers.

Theory of operation (Kafka's KRaft design, KIP-730). The controller gives a broker a block of
``PRODUCER_ID_BLOCK_SIZE`` ids at a time (``AllocateProducerIds``; the store keeps the next
free id, so blocks never overlap across brokers, controllers or restarts); the broker hands
them out one per InitProducerId, and asks for the next block once they are all gone. Nothing
here does IO: the driver fetches blocks and ``offer``s them.

A block is taken only if it was allocated to this incarnation and is newer than every block
taken before, so an id is never handed out twice, even when answers to concurrent requests
arrive out of order (the ids left in a block a newer one replaces are simply not used).
"""

from __future__ import annotations

import attrs

from replog.metadata.types import ProducerIdBlock

__all__ = ["ProducerIdManager"]


@attrs.define
class ProducerIdManager:
    """The block in use and the next id in it (see the module docstring)."""

    broker_id: int
    block: ProducerIdBlock | None = None
    next_id: int = 0
    #: the first id of the newest block ever taken (-1: none)
    newest_first_id: int = -1

    @property
    def remaining(self) -> int:
        """Ids left in the current block."""
        return 0 if self.block is None else self.block.last_id + 1 - self.next_id

    def take(self) -> int | None:
        """The next producer id, or None when a new block is needed."""
        if self.remaining <= 0:
            return None
        producer_id = self.next_id
        self.next_id += 1
        return producer_id

    def offer(self, block: ProducerIdBlock, incarnation_epoch: int) -> bool:
        """A block read from the store: taken (True) when it is this incarnation's and newer
        than any taken before."""
        if block.broker_id != self.broker_id or block.broker_epoch != incarnation_epoch:
            return False
        if block.first_id <= self.newest_first_id:
            return False
        self.block, self.next_id, self.newest_first_id = block, block.first_id, block.first_id
        return True
