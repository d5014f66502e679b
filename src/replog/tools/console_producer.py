"""``replog console-producer``: one record per line of stdin, as Kafka's kafka-console-producer.

``--topic`` names the topic; each line (without its line end) is a record's value. Reader
properties (``--property k=v``, Kafka's names): ``parse.key=true`` splits each line at the first
``key.separator`` (a tab by default) into key and value; a line without the separator is an
error that stops the tool, unless ``ignore.error=true`` (then the whole line is the value, as
Kafka's reader does); ``null.marker=X`` makes a key or value equal to ``X`` a null.

Client settings: ``--request-required-acks`` (``-1``/``all`` by default, as Kafka's tool),
``--compression-codec``, ``--producer-property k=v``, ``--producer.config FILE`` or
``--command-config FILE`` (Kafka's keys; ``replog.tools.client_config``). ``--sync`` waits for
each record's acknowledgement before reading the next line.

Records are sent as lines arrive and flushed at end of input; the first failed send is printed
(``Error when sending message to topic T: ...``) and makes the exit status 1. SIGINT (Ctrl-C)
flushes what was read and exits 0 if it was all acknowledged. Exit status: 0 every record
acknowledged, 1 a send failed or the cluster could not be reached, 2 usage error.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

import attrs

from replog.client import Producer, RecordMetadata
from replog.errors import ReplogError
from replog.tools.client_config import (
    add_client_config_arguments,
    parse_properties,
    producer_settings,
    settings_from_args,
)
from replog.tools.output import EXIT_OK, fail
from replog.tools.topics import add_bootstrap_argument

__all__ = ["COMMAND", "HELP", "LineReader", "add_arguments", "run"]

COMMAND = "console-producer"
HELP = "produce the lines of stdin to a topic (as kafka-console-producer)"

_READER_KEYS = frozenset({"parse.key", "key.separator", "ignore.error", "null.marker"})
_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
#: sends in flight before the oldest is waited for (keeps memory bounded on a long stdin)
_IN_FLIGHT_MAX = 10_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Kafka's kafka-console-producer options (the subset replog serves)."""
    add_bootstrap_argument(parser)
    parser.add_argument("--topic", required=True, help="the topic to produce to")
    parser.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="reader property: parse.key, key.separator, ignore.error, null.marker",
    )
    parser.add_argument(
        "--request-required-acks", default="-1", help="acks: -1 or all (default), 0 or 1"
    )
    parser.add_argument("--compression-codec", choices=_CODECS, help="compression.type")
    parser.add_argument("--sync", action="store_true", help="wait for each acknowledgement")
    add_client_config_arguments(parser, "producer")
    parser.set_defaults(usage_error=parser.error)


@attrs.frozen
class LineReader:
    """How a line becomes a key and a value (module docstring)."""

    parse_key: bool = False
    key_separator: str = "\t"
    ignore_error: bool = False
    null_marker: str | None = None

    @classmethod
    def from_properties(cls, properties: dict[str, str]) -> LineReader:
        """From ``--property`` values; ``ValueError`` for an unknown one."""
        unknown = sorted(set(properties) - _READER_KEYS)
        if unknown:
            raise ValueError(f"unknown --property {unknown[0]!r} (known: {sorted(_READER_KEYS)})")
        return cls(
            parse_key=properties.get("parse.key", "false").lower() == "true",
            key_separator=properties.get("key.separator", "\t") or "\t",
            ignore_error=properties.get("ignore.error", "false").lower() == "true",
            null_marker=properties.get("null.marker"),
        )

    def split(self, line: str, number: int) -> tuple[bytes | None, bytes | None]:
        """(key, value) of line ``number``; ``ValueError`` for a line without the separator
        when keys are parsed and errors are not ignored."""
        key: str | None = None
        value: str | None = line
        if self.parse_key:
            head, sep, tail = line.partition(self.key_separator)
            if sep:
                key, value = head, tail
            elif not self.ignore_error:
                raise ValueError(f"no key separator found on line number {number}: {line!r}")
        return self._bytes(key), self._bytes(value)

    def _bytes(self, text: str | None) -> bytes | None:
        if text is None or (self.null_marker is not None and text == self.null_marker):
            return None
        return text.encode("utf-8")


def _lines(stream: TextIO) -> Iterator[str]:
    for line in stream:
        yield line.rstrip("\r\n")


def run(args: argparse.Namespace, stdin: TextIO | None = None) -> int:
    """Run ``replog console-producer`` on parsed arguments; returns the exit status."""
    try:
        reader = LineReader.from_properties(parse_properties(args.property, "--property"))
        kafka = {"acks": args.request_required_acks, **settings_from_args(args, "producer")}
        if args.compression_codec is not None:
            kafka["compression.type"] = args.compression_codec
        settings = producer_settings(kafka)
    except ValueError as exc:
        args.usage_error(str(exc))
    try:
        with Producer(args.bootstrap_server, **settings) as producer:
            return _produce(producer, args, reader, stdin if stdin is not None else sys.stdin)
    except (ReplogError, OSError) as exc:
        return fail(COMMAND, exc)


def _produce(
    producer: Producer, args: argparse.Namespace, reader: LineReader, stdin: TextIO
) -> int:
    pending: collections.deque[concurrent.futures.Future[RecordMetadata]] = collections.deque()
    error: str | None = None
    try:
        for number, line in enumerate(_lines(stdin), 1):
            try:
                key, value = reader.split(line, number)
            except ValueError as exc:
                producer.flush()
                return fail(COMMAND, exc)  # the lines before it were sent, as Kafka's tool
            pending.append(producer.send(args.topic, value, key=key))
            if args.sync or len(pending) >= _IN_FLIGHT_MAX:
                error = _first_error([pending.popleft()])  # waits for its acknowledgement
                if error is not None:
                    break
    except KeyboardInterrupt:
        pass  # flush what was read
    producer.flush()
    error = error or _first_error(pending)
    if error is not None:
        return fail(COMMAND, f"Error when sending message to topic {args.topic}: {error}")
    return EXIT_OK


def _first_error(futures: Iterable[concurrent.futures.Future[Any]]) -> str | None:
    for future in futures:
        exc = future.exception()
        if exc is not None:
            return f"{type(exc).__name__}: {exc}"
    return None
