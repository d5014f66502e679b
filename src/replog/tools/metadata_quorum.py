"""``replog metadata-quorum``: the metadata quorum's state, as Kafka's kafka-metadata-quorum.

``--bootstrap-controller HOST:PORT,...`` names the voters (the addresses of a ``raft://`` URL or
of ``controller_voters``); DescribeQuorum goes to each until the leader answers
(``replog.client.quorum_admin``). ``describe --status`` prints Kafka's summary (LeaderId,
LeaderEpoch, HighWatermark, MaxFollowerLag, MaxFollowerLagTimeMs, CurrentVoters,
CurrentObservers); ``describe --replication`` one row per voter (NodeId, LogEndOffset, Lag,
LastFetchTimestamp, LastCaughtUpTimestamp, Status); ``--output json`` either as one document.
replog's brokers do not forward DescribeQuorum, so ``--bootstrap-server`` is refused with a
pointer to ``--bootstrap-controller``. Exit status: 0 done, 1 no voter answered as leader, 2
usage error.
"""

from __future__ import annotations

import argparse
from typing import Any

from replog.client.quorum_admin import QuorumDescription, describe_metadata_quorum
from replog.clock import wall_ms
from replog.errors import ReplogError
from replog.tools.output import EXIT_OK, add_output_argument, fail, print_json
from replog.tools.topics import bootstrap_servers

__all__ = ["COMMAND", "HELP", "add_arguments", "run"]

COMMAND = "metadata-quorum"
HELP = "describe the metadata quorum: leader, epoch, high watermark, voters' lag"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Kafka's kafka-metadata-quorum options (``describe``)."""
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--bootstrap-controller",
        type=bootstrap_servers,
        metavar="HOST:PORT[,...]",
        help="the quorum's voters",
    )
    where.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]", help="(not served)")
    parser.add_argument("--timeout-ms", type=int, default=10_000, help="per voter (default 10000)")
    add_output_argument(parser)
    commands = parser.add_subparsers(dest="quorum_command", required=True)
    describe = commands.add_parser("describe", help="the quorum's state")
    what = describe.add_mutually_exclusive_group(required=True)
    what.add_argument("--status", action="store_true", help="the summary")
    what.add_argument("--replication", action="store_true", help="one row per voter")
    parser.set_defaults(usage_error=parser.error)


def run(args: argparse.Namespace) -> int:
    """Run ``replog metadata-quorum`` on parsed arguments; returns the exit status."""
    if args.bootstrap_server is not None:
        args.usage_error(
            "replog's brokers do not forward DescribeQuorum: give the voters with "
            "--bootstrap-controller (the addresses in the raft:// URL or controller_voters)"
        )
    try:
        quorum = describe_metadata_quorum(args.bootstrap_controller, timeout_ms=args.timeout_ms)
    except (ReplogError, OSError) as exc:
        return fail(COMMAND, exc)
    now = wall_ms()
    if args.status:
        document = _status(quorum, now)
        if args.output == "json":
            print_json(document)
        else:
            for key, value in document.items():
                print(f"{key + ':':<24}{_text(value)}")
        return EXIT_OK
    rows = _replication(quorum)
    if args.output == "json":
        print_json({"replication": rows})
        return EXIT_OK
    headers = list(rows[0]) if rows else ["NodeId"]
    table = [headers, *([_text(row[h]) for h in headers] for row in rows)]
    widths = [max(len(str(line[i])) for line in table) for i in range(len(headers))]
    for line in table:
        print("  ".join(str(cell).ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())
    return EXIT_OK


def _status(quorum: QuorumDescription, now: int) -> dict[str, Any]:
    followers = [v for v in quorum.voters if v.voter_id != quorum.leader_id]
    caught = [v.last_caught_up_timestamp for v in followers]
    lag_time = 0 if not followers else (now - min(caught) if min(caught) >= 0 else -1)
    return {
        "LeaderId": quorum.leader_id,
        "LeaderEpoch": quorum.leader_epoch,
        "HighWatermark": quorum.high_watermark,
        "MaxFollowerLag": quorum.max_follower_lag,
        "MaxFollowerLagTimeMs": lag_time,
        "CurrentVoters": [v.voter_id for v in quorum.voters],
        "CurrentObservers": [o.voter_id for o in quorum.observers],
    }


def _replication(quorum: QuorumDescription) -> list[dict[str, Any]]:
    leader_end = next(
        (v.log_end_offset for v in quorum.voters if v.voter_id == quorum.leader_id), 0
    )
    return [
        {
            "NodeId": v.voter_id,
            "LogEndOffset": v.log_end_offset,
            "Lag": max(leader_end - v.log_end_offset, 0),
            "LastFetchTimestamp": v.last_fetch_timestamp,
            "LastCaughtUpTimestamp": v.last_caught_up_timestamp,
            "Status": "Leader" if v.voter_id == quorum.leader_id else "Follower",
        }
        for v in quorum.voters
    ]


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ",".join(str(v) for v in value) + "]"
    return str(value)
