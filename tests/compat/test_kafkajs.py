"""kafkajs (Node) against a 3-broker replog cluster: ``admin.fetchTopicOffsets``,
``admin.fetchTopicOffsetsByTimestamp`` and a produce with acks=all
(``tests/js/kafkajs_check.js``).

kafkajs is pinned in ``tests/js/package.json`` / ``package-lock.json`` and installed by the
Makefile (``make system-deps``, which ``make test`` runs). Its consumers work only in consumer
groups, which replog does not serve yet, so the records are read back with replog's consumer.
kafkajs asks ListOffsets at v3 at most; replog used to fail to encode that answer (a leader
epoch v3 does not carry) and leave kafkajs waiting.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replog import Admin, Cluster, Consumer

pytestmark = [pytest.mark.system, pytest.mark.timeout(180)]

JS_DIR = Path(__file__).resolve().parents[1] / "js"
TOPIC = "kafkajs"
PARTITIONS = 2
PER_PARTITION = 5
BASE_MS = 1_700_000_000_000


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster.local(3) as c:
        with Admin(c.bootstrap) as admin:
            admin.create_topics(TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
        yield c


def run_check(bootstrap: str) -> dict[str, Any]:
    node = shutil.which("node")
    assert node is not None, "node is not installed (Node 20+ is a test dependency)"
    assert (JS_DIR / "node_modules" / "kafkajs").is_dir(), (
        "kafkajs is not installed: run `make system-deps` (npm ci --prefix tests/js)"
    )
    done = subprocess.run(
        [node, str(JS_DIR / "kafkajs_check.js"), bootstrap, TOPIC, str(PER_PARTITION)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_kafkajs_fetches_topic_offsets_and_produces(cluster: Cluster) -> None:
    result = run_check(cluster.bootstrap)
    partitions = list(range(PARTITIONS))
    assert [(int(o["partition"]), o["low"], o["high"]) for o in result["before"]] == [
        (p, "0", "0") for p in partitions
    ]
    assert sorted(
        (int(r["partition"]), r["errorCode"], r["baseOffset"]) for r in result["produced"]
    ) == [(p, 0, "0") for p in partitions]
    assert [(int(o["partition"]), o["high"]) for o in result["after"]] == [
        (p, str(PER_PARTITION)) for p in partitions
    ]
    # The first record at or after the second record's time is offset 1.
    assert [(int(o["partition"]), o["offset"]) for o in result["byTime"]] == [
        (p, "1") for p in partitions
    ]

    tps = [(TOPIC, p) for p in partitions]
    with Admin(cluster.bootstrap) as admin:
        assert admin.list_offsets(tps) == {tp: PER_PARTITION for tp in tps}
    with Consumer(cluster.bootstrap) as consumer:
        consumer.assign(tps)
        consumer.seek_to_beginning()
        got: dict[int, list[tuple[bytes | None, bytes | None, int]]] = {p: [] for p in partitions}
        for _ in range(100):
            for record in consumer.poll(timeout_ms=200):
                got[record.partition].append((record.key, record.value, record.timestamp))
            if all(len(v) == PER_PARTITION for v in got.values()):
                break
    assert got == {
        p: [
            (b"k%d-%d" % (p, i), b"kafkajs-%d-%d" % (p, i), BASE_MS + i)
            for i in range(PER_PARTITION)
        ]
        for p in partitions
    }
