"""Closing a cluster right after ``__consumer_offsets`` leaders moved: the brokers load the
moved partitions' groups while they stop, and no load reads a log that stopping closed (it
logged ``cannot load __consumer_offsets-N: Bad file descriptor``). The race is not forced
here (tests/driver/test_group_loads_at_shutdown.py forces it; without the group host stopping
at the halt this test failed about one run in four); it checks the whole stop of real brokers.
"""

from __future__ import annotations

import logging

import pytest

from replog import Admin, Cluster
from replog.client import RetriableBrokerResponseError
from replog.groups import OFFSETS_TOPIC
from tests.waiting import eventually

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]

PARTITIONS = 6


def test_closing_right_after_offsets_leaders_moved_logs_no_load_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="replog")
    cluster = Cluster.local(3, groups={"offsets_topic_partitions": PARTITIONS})
    try:
        with Admin(cluster.bootstrap) as admin:
            admin.create_topics("t", 1, 3)
            for group in range(2 * PARTITIONS):  # every offsets partition holds a commit
                admin.alter_group_offsets(f"g{group}", {("t", 0): group})
            cluster.kill(2)  # its offsets partitions move away ...
            cluster.start(2)
            partitions = [(OFFSETS_TOPIC, p) for p in range(PARTITIONS)]
            eventually(  # ... and back, as soon as it has caught up
                lambda: admin.elect_preferred_leaders(partitions),
                what="the preferred leaders elected",
                done=lambda _: True,
                retry_on=(RetriableBrokerResponseError,),
            )
    finally:
        cluster.close()  # while broker 2 loads the partitions it leads again
    errors = [r.getMessage() for r in caplog.records if "cannot load" in r.getMessage()]
    assert errors == []
