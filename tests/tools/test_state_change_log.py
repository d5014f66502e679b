"""The ``state-change.log`` brokers write and ``replog state-change-log``, which merges them:
the file format and rotation with a manual clock, and the whole path on a live cluster (a topic
created through the Kafka protocol leaves the controller's request and every replica's
completion in the brokers' logs, and the tool merges them in time order)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time

import pytest

from replog import Admin, Cluster
from replog.cli import main
from replog.clock import ManualClock
from replog.state_change import Actor, Phase, StateChange, StateChangeKind
from replog.state_change_log import (
    STATE_CHANGE_LOG,
    StateChangeLog,
    format_wall_ms,
    parse_state_change_log_line,
)
from replog.tools.state_change_log import parse_time_ms
from replog.topics import TopicPartition

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]

T0_MS = parse_time_ms("2026-11-24 10:00:00")


def change(topic: str, partition: int, epoch: int, at_ms: int = 0) -> StateChange:
    """A become-leader request made at ``at_ms`` (its line's stamp: T0_MS + at_ms)."""
    return StateChange(
        kind=StateChangeKind.BECOME_LEADER,
        topic_partition=TopicPartition(topic, partition),
        requester=Actor.controller(1),
        target=Actor.broker(2),
        leader_epoch=epoch,
        partition_epoch=epoch,
        requested_ms=at_ms,
    )


def write_log(log_dir: pathlib.Path, records: list[StateChange], **limits: int) -> StateChangeLog:
    """Write ``records`` with a clock whose wall time is T0_MS + its monotonic time."""
    clock = ManualClock(1_000_000, wall_offset_ms=T0_MS)
    log = StateChangeLog.open(
        str(log_dir),
        bytes_max=limits.get("bytes_max", 1 << 20),
        backups=limits.get("backups", 2),
        clock=clock,
    )
    for record in records:
        log.write(record)
    log.close()
    return log


def test_a_written_line_carries_its_wall_time_and_parses_back(tmp_path: pathlib.Path) -> None:
    record = change("orders", 3, 7, at_ms=9).received(1_234)
    write_log(tmp_path, [record])
    (line,) = (tmp_path / STATE_CHANGE_LOG).read_text().splitlines()
    assert line.startswith("[2026-11-24 10:00:01,234] 1234 broker 2 received become-leader")
    assert parse_state_change_log_line(line) == (T0_MS + 1_234, record)
    assert format_wall_ms(T0_MS + 5) == "2026-11-24 10:00:00,005"


def test_the_log_rotates_by_size_and_keeps_the_configured_backups(
    tmp_path: pathlib.Path,
) -> None:
    write_log(tmp_path, [change("t", 0, i) for i in range(100)], bytes_max=1_000, backups=2)
    names = sorted(os.listdir(tmp_path))
    assert names == [STATE_CHANGE_LOG, f"{STATE_CHANGE_LOG}.1", f"{STATE_CHANGE_LOG}.2"]
    assert all(os.path.getsize(tmp_path / n) <= 1_000 for n in names)
    newest = (tmp_path / STATE_CHANGE_LOG).read_text().splitlines()
    assert parse_state_change_log_line(newest[-1])[1].leader_epoch == 99


def test_a_closed_log_writes_nothing(tmp_path: pathlib.Path) -> None:
    log = write_log(tmp_path, [change("t", 0, 1)])
    log.write(change("t", 0, 2))
    assert len((tmp_path / STATE_CHANGE_LOG).read_text().splitlines()) == 1


def test_the_tool_merges_files_in_time_order_and_filters(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_log(tmp_path / "a", [change("t", 0, 1, at_ms=10), change("t", 1, 3, at_ms=30)])
    write_log(tmp_path / "b", [change("t", 0, 2, at_ms=20), change("u", 0, 4, at_ms=40)])
    files = [str(tmp_path / d / STATE_CHANGE_LOG) for d in ("a", "b")]
    assert main(["state-change-log", "--files", *files]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [parse_state_change_log_line(x)[1].leader_epoch for x in lines] == [1, 2, 3, 4]
    assert lines[0].startswith("[2026-11-24 10:00:00,010] ")
    assert main(["state-change-log", "--logs", *files]) == 0  # Kafka's name for the option
    assert capsys.readouterr().out.splitlines() == lines

    def epochs(*filters: str) -> list[int]:
        assert main(["state-change-log", "--files", *files, "--output", "json", *filters]) == 0
        return [r["leader_epoch"] for r in json.loads(capsys.readouterr().out)["records"]]

    assert epochs("--topic", "t") == [1, 2, 3]
    assert epochs("--topic", "t", "--partitions", "1") == [3]
    assert epochs("--start-time", "2026-11-24 10:00:00,020") == [2, 3, 4]
    assert epochs("--end-time", "2026-11-24T10:00:00.030") == [1, 2, 3]
    assert epochs(
        "--partitions", "0,1", "--topic", "u|t", "--end-time", "2026-11-24 10:00:00,010"
    ) == [1]


def test_the_tool_reports_torn_lines_and_unreadable_files(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_log(tmp_path, [change("t", 0, 1, at_ms=10)])
    path = tmp_path / STATE_CHANGE_LOG
    with open(path, "a", encoding="utf-8") as torn:
        torn.write("[2026-11-24 10:00:00,020] 20 broker 2 rece")
    assert main(["state-change-log", "--files", str(path)]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 1
    assert captured.err.startswith(f"replog state-change-log: skipped {path}:2: ")
    assert main(["state-change-log", "--files", str(tmp_path / "missing.log")]) == 1
    assert "No such file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        main(["state-change-log", "--files", str(path), "--start-time", "yesterday"])
    assert usage.value.code == 2


def records_about(paths: list[pathlib.Path], topic: str) -> list[StateChange]:
    return [
        parse_state_change_log_line(line)[1]
        for path in paths
        if path.exists()
        for line in path.read_text().splitlines()
        if f" for {topic}-" in line
    ]


def logged_creation(records: list[StateChange]) -> bool:
    """Whether the controller's become-leader requests and all six replicas' completions of a
    2-partition, 3-replica topic "logged" are there."""
    requested = {
        r.topic_partition
        for r in records
        if r.phase is Phase.REQUESTED and r.kind is StateChangeKind.BECOME_LEADER
    }
    completed = {
        (r.topic_partition, r.target)
        for r in records
        if r.phase is Phase.COMPLETED
        and r.kind in (StateChangeKind.BECOME_LEADER, StateChangeKind.BECOME_FOLLOWER)
    }
    everyone = {(TopicPartition("logged", p), Actor.broker(b)) for p in (0, 1) for b in (1, 2, 3)}
    return requested == {("logged", 0), ("logged", 1)} and completed >= everyone


def test_brokers_log_a_topic_creation_and_the_tool_merges_it(tmp_path: pathlib.Path) -> None:
    with Cluster.local(3, base_dir=str(tmp_path)) as cluster:
        with Admin(cluster.bootstrap) as admin:
            admin.create_topics("logged", 2, 3)
        paths = [tmp_path / f"broker-{i}" / STATE_CHANGE_LOG for i in (1, 2, 3)]
        deadline = time.monotonic() + 20
        while not logged_creation(records_about(paths, "logged")):
            assert time.monotonic() < deadline, records_about(paths, "logged")
            time.sleep(0.05)
        done = subprocess.run(
            [
                str(pathlib.Path(sys.executable).parent / "replog"),
                *("state-change-log", "--files", *map(str, paths), "--topic", "logged"),
                *("--output", "json"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    merged = json.loads(done.stdout)["records"]
    assert {r["topic"] for r in merged} == {"logged"}
    assert {r["file"] for r in merged} == set(map(str, paths))
    times = [r["wall_ms"] for r in merged]
    assert times == sorted(times)
    for p in (0, 1):
        # stamped with each change's own time, a partition's story starts with the controller's
        # requests, not with the completions they caused (which the controller's records, handed
        # to the broker after its metadata write, would follow if stamped when written)
        story = [r for r in merged if r["partition"] == p]
        requested_ms = min(r["wall_ms"] for r in story if r["phase"] == "requested")
        completed_ms = min(r["wall_ms"] for r in story if r["phase"] == "completed")
        assert requested_ms <= completed_ms
