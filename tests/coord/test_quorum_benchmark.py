"""``python -m benchmarks.quorum`` with tiny sizes: every case runs on the built-in quorum (one
and three voters) and on single-server ZooKeeper and etcd, and reports the figures the README
quotes. A smoke test: nothing here asserts a figure, only that each case measured something."""

from __future__ import annotations

import argparse
from typing import Any

import pytest
from benchmarks import quorum as bench

from tests.servers import require_zookeeper
from tests.servers_etcd import require_etcd

pytestmark = pytest.mark.system


def test_every_case_reports_on_every_deployment() -> None:
    require_zookeeper()
    require_etcd()
    args = argparse.Namespace(
        repeats=1,
        ops=3,
        failovers=1,
        deployments="raft1,raft3,zk1,etcd1",
        cases=",".join(bench.CASES),
        raft_election_timeout_ms=300,
        raft_fetch_timeout_ms=1_000,
        keep=False,
    )
    lines: list[dict[str, Any]] = []
    results = bench.run(args, lines.append)
    measured = {(r["deployment"], r["case"]) for r in results}
    assert measured == {
        *(
            (d, c)
            for d in ("raft1", "raft3", "zk1", "etcd1")
            for c in ("topic_creations", "isr_changes")
        ),
        ("raft1", "restart"),
        ("raft3", "failover"),
        ("zk1", "restart"),
        ("etcd1", "restart"),
    }
    for result in results:
        if result["case"] in ("failover", "restart"):
            assert result["seconds"] > 0 and result["attempts"] >= 1
        else:
            assert result["ops"] == 3 and result["ops_per_s"] > 0
    summaries = [line for line in lines if line.get("summary")]
    assert len(summaries) == len(measured)
    for line in summaries:
        assert line["min"] <= line["median"] <= line["max"] and line["runs"] == 1
    raft3 = next(r for r in results if r["case"] == "failover")
    assert raft3["new_leader"] not in (None, raft3["killed"])
