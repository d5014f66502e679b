"""``replog verify-replicas``: check that every replica of the chosen partitions holds the same
records, as Kafka's kafka-replica-verification (the seed's replica verification tool).

For each partition of the topics matching ``--topic-white-list`` (or its newer name
``--topics-include``; a regular expression matched against the whole name, default every
topic) the tool reads the partition from *every* replica in its assignment, leader and
followers alike, with Kafka's debugging-consumer fetch (replica id -2, which a follower serves
from its own log up to its own high watermark). It compares the replicas' batches (offsets and
CRC) from the latest log start offset among them up to the lowest high watermark among them --
records every replica claims are committed -- and reports per partition:

- the replicas' high watermarks and the lag: the largest high watermark minus the smallest;
- the first offset where the replicas' batches differ, if any (a divergence).

One report by default; with ``--report-interval-ms N`` a report every N ms until interrupted
(or ``--reports`` reports). The text report ends with Kafka's summary line ("max lag is ... for
partition ... among ... partitions").

Exit status: 0 every replica was read and none diverged, 1 a divergence was found or a replica
could not be read (named in the report; also when no topic matches), 2 usage error.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import sys
from typing import Any

import attrs

from replog.client import Admin
from replog.client.errors import ConnectionLostError
from replog.client.replica_reads import ReplicaBatch, ReplicaRead
from replog.clock import sleep_s, wall_ms
from replog.errors import ReplogError, RequestTimeoutError
from replog.tools.client_config import add_command_config_argument, admin_options
from replog.tools.output import EXIT_FAILED, EXIT_OK, add_output_argument, fail, print_json
from replog.tools.topics import bootstrap_servers

__all__ = ["COMMAND", "HELP", "PartitionCheck", "add_arguments", "compare_replicas", "run"]

COMMAND = "verify-replicas"
HELP = "check that all replicas of partitions hold the same records (as kafka-replica-verification)"

_FETCH_BYTES = 1 << 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Kafka's kafka-replica-verification options (the subset replog serves) plus ``--output``."""
    parser.add_argument(
        "--bootstrap-server",
        "--broker-list",
        dest="bootstrap_server",
        required=True,
        type=bootstrap_servers,
        metavar="HOST:PORT[,...]",
    )
    topics = parser.add_mutually_exclusive_group()
    topics.add_argument("--topic-white-list", metavar="REGEX", help="topics to verify (all)")
    topics.add_argument("--topics-include", metavar="REGEX", help="the same, Kafka's newer name")
    parser.add_argument(
        "--fetch-size", type=int, default=_FETCH_BYTES, help="bytes per fetch (default 1 MiB)"
    )
    parser.add_argument(
        "--report-interval-ms", type=int, help="report every N ms until interrupted (default: once)"
    )
    parser.add_argument(
        "--reports", type=int, help="with --report-interval-ms: stop after this many reports"
    )
    parser.add_argument(
        "--timeout-ms", type=int, default=30_000, help="request timeout (default 30000)"
    )
    add_command_config_argument(parser)
    add_output_argument(parser)
    parser.set_defaults(usage_error=parser.error)


@attrs.frozen(kw_only=True)
class PartitionCheck:
    """One partition's verdict: each replica's read (None: could not be reached), the offsets
    compared ([verified_from, verified_to)), the lag between the replicas' high watermarks and
    the first offset where their batches differ (None: they agree)."""

    topic: str
    partition: int
    reads: dict[int, ReplicaRead | None]
    verified_from: int
    verified_to: int
    lag: int
    divergence: int | None
    differing: dict[int, ReplicaBatch | None]

    @property
    def unreadable(self) -> list[int]:
        """Replicas that could not be read (unreachable, or refused the read)."""
        return [b for b, r in self.reads.items() if not _ok(r)]


def compare_replicas(
    batches: dict[int, list[ReplicaBatch]],
) -> tuple[int | None, dict[int, ReplicaBatch | None]]:
    """The first offset at which the replicas' batch lists differ (a batch with other offsets
    or another CRC, or a batch one replica has and another lacks) and each replica's batch
    there (None: it has none); (None, {}) when they agree."""
    longest = max((len(b) for b in batches.values()), default=0)
    for index in range(longest):
        here = {broker: (bs[index] if index < len(bs) else None) for broker, bs in batches.items()}
        if len(set(here.values())) > 1:
            offsets = [b.base_offset for b in here.values() if b is not None]
            return min(offsets), here
    return None, {}


def run(args: argparse.Namespace) -> int:
    """Run ``replog verify-replicas`` on parsed arguments; returns the exit status."""
    if args.reports is not None and args.report_interval_ms is None:
        args.usage_error("--reports goes with --report-interval-ms")
    if args.fetch_size <= 0 or (args.report_interval_ms or 0) < 0:
        args.usage_error("--fetch-size must be > 0 and --report-interval-ms >= 0")
    pattern = args.topics_include or args.topic_white_list or ".*"
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        args.usage_error(f"bad topic regular expression {pattern!r}: {exc}")
    reports = 0
    try:
        options = admin_options(args)
    except ValueError as exc:
        args.usage_error(str(exc))
    try:
        with Admin(args.bootstrap_server, **options) as admin:
            while True:
                names = [n for n in admin.list_topics() if regex.fullmatch(n)]
                if not names:
                    return fail(COMMAND, f"no topic matches {pattern!r}")
                checks = [check for name in names for check in _check_topic(admin, args, name)]
                _print_report(args, checks)
                reports += 1
                bad = any(c.divergence is not None or c.unreadable for c in checks)
                if bad:
                    return EXIT_FAILED
                if args.report_interval_ms is None or (args.reports and reports >= args.reports):
                    return EXIT_OK
                sys.stdout.flush()
                sleep_s(args.report_interval_ms / 1000)
    except (ReplogError, OSError) as exc:
        return fail(COMMAND, exc)


def _check_topic(admin: Admin, args: argparse.Namespace, name: str) -> list[PartitionCheck]:
    topic = admin.describe_topics([name])[name]
    return [
        _check_partition(admin, args, name, part.partition, part.replicas)
        for part in topic.partitions
    ]


def _read(
    admin: Admin, broker_id: int, topic: str, partition: int, offset: int, size: int
) -> ReplicaRead | None:
    try:
        return admin.read_replica(broker_id, topic, partition, offset, size)
    except (ConnectionLostError, RequestTimeoutError, OSError, ReplogError):
        return None  # the broker is down or unreachable: reported as unreadable


def _check_partition(
    admin: Admin, args: argparse.Namespace, topic: str, partition: int, replicas: tuple[int, ...]
) -> PartitionCheck:
    """Read every replica from the latest log start to the lowest high watermark; compare."""
    probes = {b: _read(admin, b, topic, partition, 0, 1) for b in replicas}
    served = {b: r for b, r in probes.items() if r is not None and r.error in _SERVED}
    reads: dict[int, ReplicaRead | None] = dict(probes)
    start = max((r.log_start_offset for r in served.values()), default=0)
    end = min((r.high_watermark for r in served.values()), default=0)
    hws = [r.high_watermark for r in served.values()]
    lag = max(hws) - min(hws) if hws else 0
    batches: dict[int, list[ReplicaBatch]] = {b: [] for b in served}
    for broker in served:
        offset = start
        while offset < end:
            read = _read(admin, broker, topic, partition, offset, args.fetch_size)
            if not _ok(read) or read is None or read.next_offset is None:
                reads[broker] = read  # failed mid-way: unreadable
                break
            batches[broker].extend(b for b in read.batches if b.base_offset < end)
            offset = read.next_offset
        else:
            reads[broker] = attrs.evolve(served[broker], error="NONE", batches=())
    divergence, differing = compare_replicas({b: bs for b, bs in batches.items() if _ok(reads[b])})
    return PartitionCheck(
        topic=topic,
        partition=partition,
        reads=reads,
        verified_from=start,
        verified_to=max(start, end),
        lag=lag,
        divergence=divergence,
        differing=differing,
    )


def _ok(read: ReplicaRead | None) -> bool:
    return read is not None and read.error == "NONE"


#: answers to the probe at offset 0 that still tell the replica's log start and HW
_SERVED = ("NONE", "OFFSET_OUT_OF_RANGE")


def _print_report(args: argparse.Namespace, checks: list[PartitionCheck]) -> None:
    worst = max(checks, key=lambda c: c.lag, default=None)
    if args.output == "json":
        print_json(
            {
                "partitions": [_check_json(c) for c in checks],
                "max_lag": None
                if worst is None
                else {"lag": worst.lag, "topic": worst.topic, "partition": worst.partition},
                "diverged": [
                    {"topic": c.topic, "partition": c.partition, "offset": c.divergence}
                    for c in checks
                    if c.divergence is not None
                ],
            }
        )
        return
    for check in checks:
        print(_check_line(check))
    if worst is not None:
        stamp = dt.datetime.fromtimestamp(wall_ms() / 1000, tz=dt.UTC).isoformat()
        print(
            f"{stamp}: max lag is {worst.lag} for partition {worst.topic}-{worst.partition} "
            f"at offset {worst.verified_to} among {len(checks)} partitions"
        )


def _check_json(check: PartitionCheck) -> dict[str, Any]:
    return {
        "topic": check.topic,
        "partition": check.partition,
        "replicas": [
            {
                "broker_id": b,
                "error": "UNREACHABLE" if r is None else r.error,
                "high_watermark": None if r is None else r.high_watermark,
                "log_start_offset": None if r is None else r.log_start_offset,
            }
            for b, r in check.reads.items()
        ],
        "verified_from": check.verified_from,
        "verified_to": check.verified_to,
        "lag": check.lag,
        "divergence": None
        if check.divergence is None
        else {
            "offset": check.divergence,
            "batches": {
                str(b): None if x is None else [x.base_offset, x.last_offset, x.crc]
                for b, x in check.differing.items()
            },
        },
    }


def _check_line(check: PartitionCheck) -> str:
    hws = ",".join(f"{b}:{'?' if r is None else r.high_watermark}" for b, r in check.reads.items())
    line = (
        f"{check.topic}-{check.partition}: high watermarks {hws}, lag {check.lag}, "
        f"verified [{check.verified_from}, {check.verified_to})"
    )
    if check.unreadable:
        line += ", unreadable replicas " + ",".join(map(str, check.unreadable))
    if check.divergence is not None:
        theirs = "; ".join(
            f"replica {b}: "
            + ("none" if x is None else f"{x.base_offset}-{x.last_offset} crc {x.crc:#010x}")
            for b, x in check.differing.items()
        )
        line += f", DIVERGED at offset {check.divergence} ({theirs})"
    return line
