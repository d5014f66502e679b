"""``SimNetwork``: a seeded message network over the simulator's event queue.

Every message is a Python object handed to a delivery callback after a random delay. Faults:
loss (``drop_rate``), duplication (``duplicate_rate``, only for messages marked duplicable:
replication and consumer fetches; produce requests ride one TCP connection in reality and a
non-idempotent producer has no dedup, so duplicating them would only test the test), reordering
(independent random delays), partitions (a blocked directed link: symmetric partitions block
both directions, one-way ones one) and clogged links (a large extra delay, like a full socket
buffer). Node ids are ints: brokers 1..n, clients from 100 up.

A node listed in ``rngs`` draws the faults and delays of every message it sends or receives from
its own generator instead of the network's, so clients added later (the consumer-group clients)
leave the draws of the others' messages, and so every seed's existing schedule, unchanged.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import attrs

__all__ = ["NetConfig", "SimNetwork"]


@attrs.frozen
class NetConfig:
    """Per-seed network behaviour."""

    delay_ms_min: int = 1
    delay_ms_max: int = 5
    drop_rate: float = 0.0
    duplicate_rate: float = 0.0
    clog_delay_ms_max: int = 300


@attrs.define
class SimNetwork:
    """Links between nodes; ``schedule(delay_ms, fn)`` comes from the event loop."""

    rng: random.Random
    config: NetConfig
    schedule: Callable[[int, Callable[[], None]], None]
    blocked: set[tuple[int, int]] = attrs.field(factory=set)
    clogged: set[tuple[int, int]] = attrs.field(factory=set)
    sent_count: int = 0
    dropped_count: int = 0
    #: node -> the generator its messages draw from (see the module docstring)
    rngs: dict[int, random.Random] = attrs.field(factory=dict)

    def send(
        self, src: int, dst: int, deliver: Callable[[], None], *, duplicable: bool = True
    ) -> None:
        """Queue ``deliver`` at ``dst`` (or lose it); faults drawn from the seeded rng."""
        self.sent_count += 1
        rng = self.rngs.get(src) or self.rngs.get(dst) or self.rng
        if (src, dst) in self.blocked or rng.random() < self.config.drop_rate:
            self.dropped_count += 1
            return
        copies = 2 if duplicable and rng.random() < self.config.duplicate_rate else 1
        for _ in range(copies):
            delay_ms = rng.randint(self.config.delay_ms_min, self.config.delay_ms_max)
            if (src, dst) in self.clogged:
                delay_ms += rng.randint(0, self.config.clog_delay_ms_max)
            self.schedule(delay_ms, deliver)

    def partition(self, side_a: set[int], side_b: set[int], *, one_way: bool = False) -> None:
        """Cut a->b (and b->a unless ``one_way``)."""
        for a in side_a:
            for b in side_b:
                self.blocked.add((a, b))
                if not one_way:
                    self.blocked.add((b, a))

    def clog(self, a: int, b: int) -> None:
        """Make a->b slow."""
        self.clogged.add((a, b))

    def heal(self) -> None:
        """Remove every partition and clog."""
        self.blocked.clear()
        self.clogged.clear()
