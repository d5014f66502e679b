"""``replog metadata-quorum`` against a live 3-voter built-in quorum: what it prints matches the
voters' own state (leader, epoch, high watermark), a killed leader's successor is reported at a
higher epoch, and bad input or a quorum that is down is a clear error."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from replog.cli import main
from replog.quorum.local import LocalQuorum
from tests.waiting import eventually

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]


@pytest.fixture
def quorum(tmp_path: pathlib.Path) -> Iterator[LocalQuorum]:
    with LocalQuorum.start(3, str(tmp_path)) as quorum:
        quorum.wait_for_leader()
        yield quorum


def voters(quorum: LocalQuorum) -> str:
    return quorum.url.split("://", 1)[1]


def status(quorum: LocalQuorum, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert (
        main(
            [
                "metadata-quorum",
                "--bootstrap-controller",
                voters(quorum),
                "--output",
                "json",
                "describe",
                "--status",
            ]
        )
        == 0
    )
    return dict(json.loads(capsys.readouterr().out))


def test_status_and_replication_match_the_voters(
    quorum: LocalQuorum, capsys: pytest.CaptureFixture[str]
) -> None:
    leader = quorum.leader_id()
    own = quorum.nodes[leader].call(lambda s: s.status())
    seen = eventually(
        lambda: status(quorum, capsys),
        what="every follower caught up",
        done=lambda s: s["MaxFollowerLag"] == 0,
    )
    assert seen["LeaderId"] == leader and seen["LeaderEpoch"] == own["epoch"]
    assert seen["HighWatermark"] >= own["high_watermark"] and seen["CurrentVoters"][0] == leader
    assert sorted(seen["CurrentVoters"]) == [1, 2, 3] and seen["CurrentObservers"] == []
    assert (
        main(["metadata-quorum", "--bootstrap-controller", voters(quorum), "describe", "--status"])
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["LeaderId:", str(leader)]
    assert [line.split(":")[0] for line in lines] == [
        "LeaderId",
        "LeaderEpoch",
        "HighWatermark",
        "MaxFollowerLag",
        "MaxFollowerLagTimeMs",
        "CurrentVoters",
        "CurrentObservers",
    ]
    assert (
        main(
            [
                "metadata-quorum",
                "--bootstrap-controller",
                voters(quorum),
                "describe",
                "--replication",
            ]
        )
        == 0
    )
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == [
        "NodeId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    ]
    statuses = {int(row.split()[0]): row.split()[-1] for row in table[1:]}
    assert statuses == {v: "Leader" if v == leader else "Follower" for v in (1, 2, 3)}


def test_a_new_leader_is_reported_after_the_old_one_dies(
    quorum: LocalQuorum, capsys: pytest.CaptureFixture[str]
) -> None:
    before = status(quorum, capsys)
    quorum.kill_node(before["LeaderId"])
    after = eventually(
        lambda: (
            status(quorum, capsys) if quorum.leader_id() not in (None, before["LeaderId"]) else None
        ),
        what="a new leader answers",
    )
    assert after["LeaderId"] != before["LeaderId"]
    assert after["LeaderEpoch"] > before["LeaderEpoch"]


def test_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "metadata-quorum",
                "--bootstrap-controller",
                "127.0.0.1:1",
                "--timeout-ms",
                "500",
                "describe",
                "--status",
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert "no voter answered as the quorum's leader" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as exit_:
        main(["metadata-quorum", "--bootstrap-server", "127.0.0.1:9092", "describe", "--status"])
    assert exit_.value.code == 2
    assert "--bootstrap-controller" in capsys.readouterr().err
