"""The simulated producer's idempotence, as a Kafka client's: a producer id and epoch from
InitProducerId (any broker; the controller allocates the blocks), a sequence per partition, one
batch in flight per partition, and the network free to deliver such a batch twice -- the
brokers' producer state must append it once (the history checker reports a ``duplicate``
otherwise) and answer the second copy with the first one's offset (else ``wrong-offset``).

Any answer but success (an error, a timeout, a closed connection) ends the producer id: the next
sends get a fresh one and start at sequence 0 again, which is what a Kafka client does after an
epoch bump (the old id's sequences may have a gap). Only acks=all batches are idempotent, as
Kafka clients require.
"""

from __future__ import annotations

from typing import Any

from replog.errors import ErrorCode
from replog.protocol import messages as m
from replog.testing.clients import ClientHost, code_of

__all__ = ["Idempotence", "Stamp"]

INIT_NODE = 110
Stamp = tuple[int, int, int]
"""(producer id, producer epoch, base sequence) of one idempotent batch."""


class Idempotence:
    """Producer id, epochs and sequences of the simulated producer (module docstring)."""

    def __init__(self, sim: ClientHost) -> None:
        self._sim = sim
        self._producer_id = -1
        self._epoch = -1
        self._asking = False
        self._next_sequence: dict[tuple[str, int], int] = {}
        self._in_flight: set[tuple[str, int]] = set()
        #: every producer id handed out, to check none is handed out twice
        self.handed_out: set[int] = set()

    def stamp(self, tp: tuple[str, int]) -> Stamp | None:
        """The (id, epoch, sequence) for the next batch to ``tp``, or None to send it plain
        (no id yet, or a batch of ``tp`` is in flight). Asks for an id when there is none."""
        if self._producer_id < 0:
            self._ask()
            return None
        if tp in self._in_flight:
            return None
        self._in_flight.add(tp)
        return self._producer_id, self._epoch, self._next_sequence.get(tp, 0)

    def answered(self, tp: tuple[str, int], stamp: Stamp, error: ErrorCode | None) -> None:
        """The answer to a stamped batch (``error`` None: no answer)."""
        if stamp[0] != self._producer_id:
            return  # an answer for an id already given up
        self._in_flight.discard(tp)
        if error is ErrorCode.NONE:
            self._next_sequence[tp] = stamp[2] + 1
        else:
            self._producer_id, self._epoch = -1, -1
            self._next_sequence.clear()
            self._in_flight.clear()

    def _ask(self) -> None:
        sim = self._sim
        brokers = sorted(sim.brokers)
        if self._asking or not brokers:
            return
        self._asking = True
        body = m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000)
        sim.rpc.call(
            INIT_NODE,
            sim.rng.choice(brokers),
            body,
            self._on_init,
            client_id="sim-producer",
            timeout_ms=sim.opts.client_timeout_ms,
        )

    def _on_init(self, body: Any) -> None:
        self._asking = False
        if not isinstance(body, m.InitProducerIdResponse):
            return
        if code_of(body.error_code) is not ErrorCode.NONE:
            return
        if body.producer_id in self.handed_out:
            self._sim.violation(f"producer-id-reused: {body.producer_id} handed out twice")
        self.handed_out.add(body.producer_id)
        self._producer_id, self._epoch = body.producer_id, body.producer_epoch
        self._next_sequence.clear()
        self._in_flight.clear()
