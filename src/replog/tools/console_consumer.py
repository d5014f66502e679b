"""``replog console-consumer``: print a topic's records, as Kafka's kafka-console-consumer.

What to read: ``--topic T`` or ``--include REGEX`` (every topic whose whole name matches), in a
consumer group with ``--group G`` (partitions shared with the group's other members, offsets
committed), or without one (every partition, nothing committed). ``--partition N`` reads one
partition of ``--topic`` (no group) from ``--offset`` (``earliest``, ``latest`` -- the default --
or a number). ``--from-beginning`` starts where there is no committed offset at the earliest
record instead of the next one. ``--isolation-level`` is accepted with Kafka's two values;
without transactions in replog yet, both read the same records.

When to stop: after ``--max-messages N`` records, after ``--timeout-ms T`` without a record
(``Timed out after T ms`` on stderr, exit 0), or at SIGINT (Ctrl-C); the group's offsets are
committed first. ``Processed a total of N messages`` goes to stderr at the end, as Kafka's.

How to print (``--property k=v``, Kafka's DefaultMessageFormatter): ``print.timestamp``
(``CreateTime:ms``), ``print.partition`` (``Partition:N``), ``print.offset`` (``Offset:N``),
``print.headers`` (``k:v,k:v`` or ``NO_HEADERS``), ``print.key``, ``print.value`` (default
true), in that order, separated by ``key.separator`` (a tab), each record ended by
``line.separator`` (a newline); a null key or value prints as ``null``.

Client settings: ``--consumer-property k=v``, ``--consumer.config FILE`` or ``--command-config
FILE`` (Kafka's keys; ``replog.tools.client_config``). Exit status: 0 done, 1 the cluster could
not be reached or a topic does not exist, 2 usage error.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any, TextIO

import attrs

from replog.client import Admin, Consumer, ConsumerRecord
from replog.clock import monotonic_ms
from replog.errors import ReplogError
from replog.tools.client_config import (
    add_client_config_arguments,
    consumer_settings,
    parse_properties,
    settings_from_args,
)
from replog.tools.output import EXIT_OK, fail
from replog.tools.topics import add_bootstrap_argument

__all__ = ["COMMAND", "HELP", "RecordFormatter", "add_arguments", "run"]

COMMAND = "console-consumer"
HELP = "print the records of topics (as kafka-console-consumer)"

_POLL_MS_MAX = 500


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Kafka's kafka-console-consumer options (the subset replog serves)."""
    add_bootstrap_argument(parser)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--topic", help="the topic to read")
    source.add_argument("--include", metavar="REGEX", help="read every topic matching REGEX")
    parser.add_argument("--group", help="consumer group (offsets committed)")
    parser.add_argument("--from-beginning", action="store_true", help="start at the earliest")
    parser.add_argument("--partition", type=int, help="read only this partition (no group)")
    parser.add_argument("--offset", default="latest", help="with --partition: earliest|latest|N")
    parser.add_argument("--max-messages", type=int, help="stop after this many records")
    parser.add_argument("--timeout-ms", type=int, help="stop after this long without a record")
    parser.add_argument(
        "--isolation-level", choices=("read_uncommitted", "read_committed"), default=None
    )
    parser.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="formatter property: print.key, print.value, print.timestamp, print.partition, "
        "print.offset, print.headers, key.separator, line.separator",
    )
    add_client_config_arguments(parser, "consumer")
    parser.set_defaults(usage_error=parser.error)


_FORMATTER_KEYS = {
    "print.timestamp": "timestamp",
    "print.partition": "partition",
    "print.offset": "offset",
    "print.headers": "headers",
    "print.key": "key",
    "print.value": "value",
}


@attrs.frozen
class RecordFormatter:
    """Kafka's DefaultMessageFormatter (module docstring)."""

    timestamp: bool = False
    partition: bool = False
    offset: bool = False
    headers: bool = False
    key: bool = False
    value: bool = True
    separator: str = "\t"
    line_end: str = "\n"

    @classmethod
    def from_properties(cls, properties: dict[str, str]) -> RecordFormatter:
        """From ``--property`` values; ``ValueError`` for an unknown one."""
        flags: dict[str, Any] = {}
        for name, text in properties.items():
            if name in _FORMATTER_KEYS:
                flags[_FORMATTER_KEYS[name]] = text.strip().lower() == "true"
            elif name == "key.separator":
                flags["separator"] = _unescape(text)
            elif name == "line.separator":
                flags["line_end"] = _unescape(text)
            else:
                known = sorted([*_FORMATTER_KEYS, "key.separator", "line.separator"])
                raise ValueError(f"unknown --property {name!r} (known: {known})")
        return cls(**flags)

    def format(self, record: ConsumerRecord) -> str:
        fields: list[str] = []
        if self.timestamp:
            fields.append(f"CreateTime:{record.timestamp}")
        if self.partition:
            fields.append(f"Partition:{record.partition}")
        if self.offset:
            fields.append(f"Offset:{record.offset}")
        if self.headers:
            pairs = [f"{k}:{_text(v)}" for k, v in record.headers]
            fields.append(",".join(pairs) if pairs else "NO_HEADERS")
        if self.key:
            fields.append(_text(record.key))
        if self.value:
            fields.append(_text(record.value))
        return self.separator.join(fields) + self.line_end


def _unescape(text: str) -> str:
    return text.encode("utf-8").decode("unicode_escape")


def _text(data: bytes | None) -> str:
    return "null" if data is None else data.decode("utf-8", errors="replace")


def _check_usage(args: argparse.Namespace) -> None:
    error = args.usage_error
    if args.partition is not None:
        if args.topic is None:
            error("--partition goes with --topic")
        if args.group is not None:
            error("--partition reads without a group: drop --group")
        if args.from_beginning and args.offset != "latest":
            error("--from-beginning and --offset both say where to start: give one")
    elif args.offset != "latest":
        error("--offset goes with --partition")
    if args.max_messages is not None and args.max_messages < 1:
        error("--max-messages must be at least 1")
    if args.timeout_ms is not None and args.timeout_ms < 0:
        error("--timeout-ms must be >= 0")
    if args.include is not None:
        try:
            re.compile(args.include)
        except re.error as exc:
            error(f"--include {args.include!r} is not a regular expression: {exc}")


def run(args: argparse.Namespace, stdout: TextIO | None = None) -> int:
    """Run ``replog console-consumer`` on parsed arguments; returns the exit status."""
    _check_usage(args)
    out = stdout if stdout is not None else sys.stdout
    try:
        formatter = RecordFormatter.from_properties(parse_properties(args.property, "--property"))
        settings = consumer_settings(settings_from_args(args, "consumer"))
        start = _start_offset(args)
    except ValueError as exc:
        args.usage_error(str(exc))
    if args.group is not None:
        settings["group_id"] = args.group
    settings.setdefault("auto_offset_reset", "earliest" if args.from_beginning else "latest")
    count = 0
    try:
        partitions = None if settings.get("group_id") else _partitions(args)
        with Consumer(args.bootstrap_server, **settings) as consumer:
            _start(consumer, args, partitions, start)
            count = _print(consumer, args, formatter, out)
            if settings.get("group_id") and settings.get("enable_auto_commit", True):
                consumer.commit()
    except (ReplogError, OSError) as exc:
        return fail(COMMAND, exc)
    except KeyboardInterrupt:
        pass  # Ctrl-C while starting (before the stop handler is in place): nothing consumed
    finally:
        out.flush()
    print(f"Processed a total of {count} messages", file=sys.stderr)
    return EXIT_OK


def _start_offset(args: argparse.Namespace) -> int | str:
    if args.partition is None:
        return "earliest" if args.from_beginning else "latest"
    if args.from_beginning or args.offset == "earliest":
        return "earliest"
    if args.offset == "latest":
        return "latest"
    try:
        offset = int(args.offset)
    except ValueError:
        raise ValueError(f"--offset {args.offset!r} is not earliest, latest or a number") from None
    if offset < 0:
        raise ValueError(f"--offset must be >= 0, got {offset}")
    return offset


def _partitions(args: argparse.Namespace) -> list[tuple[str, int]]:
    """Without a group: every partition to read (``ReplogError`` for a missing topic)."""
    with Admin(args.bootstrap_server) as admin:
        names = admin.list_topics()
        if args.include is not None:
            pattern = re.compile(args.include)
            wanted = [n for n in names if pattern.fullmatch(n) and not n.startswith("__")]
        elif args.topic in names:
            wanted = [args.topic]
        else:
            raise ReplogError(f"topic {args.topic!r} does not exist")
        described = admin.describe_topics(wanted) if wanted else {}
    tps = [(name, p.partition) for name in wanted for p in described[name].partitions]
    if args.partition is not None:
        if (args.topic, args.partition) not in tps:
            raise ReplogError(f"topic {args.topic!r} has no partition {args.partition}")
        return [(args.topic, args.partition)]
    return tps


def _start(
    consumer: Consumer,
    args: argparse.Namespace,
    partitions: list[tuple[str, int]] | None,
    start: int | str,
) -> None:
    if partitions is None:
        if args.include is not None:
            consumer.subscribe(pattern=args.include)
        else:
            consumer.subscribe([args.topic])
        return
    consumer.assign(partitions)
    if start == "earliest":
        consumer.seek_to_beginning(partitions)
    elif start == "latest":
        consumer.seek_to_end(partitions)
    else:
        consumer.seek(partitions[0], int(start))


def _print(
    consumer: Consumer, args: argparse.Namespace, formatter: RecordFormatter, out: TextIO
) -> int:
    """Print records until a stop condition (module docstring); returns how many. SIGINT asks
    for a stop that the loop takes after the poll in progress: interrupting a poll would leave
    it running on the consumer's loop while the caller commits."""
    count = 0
    last_ms = monotonic_ms()
    with _stop_on_sigint() as stopping:
        while not stopping.is_set() and (args.max_messages is None or count < args.max_messages):
            wanted = None if args.max_messages is None else args.max_messages - count
            records = consumer.poll(timeout_ms=_POLL_MS_MAX, max_records=wanted)
            for record in records:
                out.write(formatter.format(record))
            out.flush()
            count += len(records)
            if records:
                last_ms = monotonic_ms()
            elif args.timeout_ms is not None and monotonic_ms() - last_ms >= args.timeout_ms:
                print(f"Timed out after {args.timeout_ms} ms without a message", file=sys.stderr)
                break
    return count


@contextlib.contextmanager
def _stop_on_sigint() -> Iterator[threading.Event]:
    """An event SIGINT sets instead of raising KeyboardInterrupt (main thread only; elsewhere
    the event is never set and Ctrl-C behaves as Python's default)."""
    stopping = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stopping
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: stopping.set())
    try:
        yield stopping
    finally:
        signal.signal(signal.SIGINT, previous)
