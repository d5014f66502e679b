"""The broker's producer-id expiration duty: every ``producer_id_expiration_check_interval_ms``
it drops, in every log, the state of idempotent producers whose last batch is older than the
logs' ``producer_id_expiration_ms`` (Kafka's ``producer.id.expiration.ms``)."""

from __future__ import annotations

from typing import Any

from replog.log import encode_batch
from replog.topics import TopicPartition

from .shell import ScriptedShell


def test_idle_producers_expire_at_the_next_check(tmp_path: Any) -> None:
    shell = ScriptedShell(
        tmp_path,
        log={"producer_id_expiration_ms": 60_000},
        producer_id_expiration_check_interval_ms=10_000,
    )
    shell.start()
    log = shell.driver.log_manager.get_or_create_log(TopicPartition("t", 0))
    for pid in (7, 8):  # 8 writes 30 s after 7
        batch = encode_batch(
            [b"v"], base_timestamp=shell.clock.wall_ms(), producer_id=pid, producer_epoch=0,
            base_sequence=0,
        )  # fmt: skip
        log.append_as_leader(batch, 0)
        shell.tick(25_000 if pid == 7 else 5_000)
        shell.tick(5_000)
    assert set(log.producer_state.producers) == {7, 8}  # 7 is 40 s idle
    for _ in range(30):  # the checks every 10 s see 7 idle for 60 s by 70 s
        shell.tick(1_000)
    assert set(log.producer_state.producers) == {8}
    for _ in range(30):
        shell.tick(1_000)
    assert log.producer_state.producers == {}
