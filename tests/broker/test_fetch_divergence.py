"""A follower whose log diverged from its leader's truncates on the leader's diverging-epoch
answer (KIP-595 truncation on fetch): the answer goes through the Fetch v12 wire codec both
ways (``replog.protocol.fetch_v12``), over real TCP."""

from __future__ import annotations

import pytest

from replog import Cluster, Producer
from replog.protocol import compiled, fetch_v12
from tests.broker.test_cluster import wait_for
from tests.broker.test_resilience import create, describe, force_leader, read_all

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]


def test_a_follower_ahead_of_an_unclean_leader_truncates_on_its_diverging_epoch(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    diverging_answers: list[int] = []
    decode = fetch_v12.decode_fetch_response

    def counting_decode(buf: memoryview, pos: int) -> object:
        found = decode(buf, pos)
        assert found is not None, "the fast decoder declined a broker's answer"
        for topic in found[0].responses:
            for p in topic.partitions:
                if p.diverging_epoch is not None:
                    diverging_answers.append(p.diverging_epoch.end_offset)
        return found

    monkeypatch.setitem(
        compiled._FAST_DECODERS,
        (fetch_v12.FetchResponse, fetch_v12.VERSION),
        counting_decode,
    )
    with Cluster.local(2, base_dir=str(tmp_path)) as cluster:
        info = create(cluster, "diverged", replication_factor=2, min_isr=1)
        old_leader = info.leader
        ahead = next(r for r in info.replicas if r != old_leader)
        with Producer(cluster.bootstrap, acks="all") as producer:
            for i in range(5):
                producer.send("diverged", b"c%d" % i, partition=0).result(20)
        cluster.stop(old_leader, controlled=False)
        wait_for(lambda: describe(cluster, "diverged").leader == ahead, timeout_s=20)
        with Producer(cluster.bootstrap, acks=1) as producer:
            for i in range(3):  # only `ahead` has these, in an epoch the old leader never saw
                producer.send("diverged", b"u%d" % i, partition=0).result(20)
        cluster.stop(ahead, controlled=False)
        cluster.start(old_leader)
        force_leader(cluster, "diverged", old_leader)  # the unclean election, by hand
        cluster.start(ahead)
        log = cluster.brokers[ahead].local_log("diverged", 0)
        assert log is not None
        wait_for(lambda: cluster.call(lambda: log.log_end_offset) == 5, timeout_s=20)
        wait_for(lambda: ahead in describe(cluster, "diverged").isr, timeout_s=20)
        assert read_all(cluster, "diverged", 5) == [b"c%d" % i for i in range(5)]
    assert 5 in diverging_answers  # the leader's end offset of the follower's last epoch
