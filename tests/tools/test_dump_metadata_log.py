"""``replog dump-log --cluster-metadata-decoder`` on a voter's metadata log: every record shown
as the quorum command (or control record) it holds, and what cannot be decoded said so."""

from __future__ import annotations

import json
import pathlib

import pytest

from replog import Admin, Cluster
from replog.cli import main
from replog.quorum.local import LocalQuorum
from replog.quorum.record_text import metadata_record_text

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]


def test_the_metadata_log_reads_as_commands(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with LocalQuorum.start(3, str(tmp_path)) as quorum:
        quorum.wait_for_leader()
        with Cluster.local(1, coordinator=quorum.url) as cluster, Admin(cluster.bootstrap) as admin:
            admin.create_topics("decoded", 1, 1)
    log_dir = tmp_path / "node-1" / "__cluster_metadata-0"
    assert main(["dump-log", "--cluster-metadata-decoder", str(log_dir)]) == 0
    records = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    first = json.loads(records[0].split("control: ", 1)[1])
    assert first["type"] == "leader-change" and sorted(first["data"]["voters"]) == [1, 2, 3]
    payloads = [json.loads(r.split("payload: ", 1)[1]) for r in records if "payload: " in r]
    kinds = {p["type"] for p in payloads}
    assert {"InitCluster", "RegisterBroker", "CreateTopicWrite"} <= kinds
    created = [p for p in payloads if p["type"] == "CreateTopicWrite"]
    assert created[0]["data"]["topic"] == "decoded"


def test_what_cannot_be_decoded_is_said() -> None:
    assert metadata_record_text(None, b"\xff\xfe").startswith("payload: undecodable (2 bytes)")
    assert metadata_record_text(None, b"[1, 2]") == (
        "payload: undecodable (6 bytes): not a quorum command"
    )
    assert metadata_record_text(None, None) == "payload: null"
    assert metadata_record_text(b"snapshot-header", b'{"endOffset": 5, "epoch": 2}') == (
        'control: {"data": {"endOffset": 5, "epoch": 2}, "type": "snapshot-header"}'
    )
