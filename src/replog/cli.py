"""The ``replog`` command line, in the spirit of Kafka's tools.

Commands so far:

- ``dump-log PATH`` (segments, indexes, CRC validity; ``--cluster-metadata-decoder``: the
  metadata log's records as quorum commands). Exit status: 0 when everything read was
  valid, 1 when a batch failed its CRC or a tail did not frame, 2 on usage errors.
- ``broker --config FILE`` runs one broker until SIGTERM/SIGINT, as ``python -m replog.broker``
  (see ``replog.broker.__main__``). Exit status: 0 after a stop, 1 when it could not start, 2
  on a bad config file, 3 when it failed while running (a step that must not fail raised: the
  broker logged it CRITICAL and stopped itself rather than run on half alive).
- ``controller --node-id N --voters 1@host:port,... --data-dir D`` runs one voter of the
  built-in metadata quorum (``replog.quorum.main``; brokers use ``raft://...``).
- the operator tools of ``replog.tools``, which manage a running cluster through the Kafka
  protocol: ``topics`` (create, delete, alter partitions and configs, describe, list),
  ``state-change-log`` (merge brokers' state-change logs), ``reassign`` (generate / execute /
  verify / cancel partition reassignments in Kafka's JSON formats; ``--add-brokers`` and
  ``--remove-brokers`` plans), ``elect-leaders`` (preferred or unclean), ``consumer-groups``
  (list, describe with lag, reset offsets -- a dry run unless ``--execute``, refused while the
  group has members --, delete groups and offsets), ``verify-replicas`` (compare every
  replica of partitions: high-watermark lag, first differing offset), ``console-producer``
  (lines of stdin as records), ``console-consumer`` (print records; groups, partitions and
  offsets, Kafka's formatter properties), ``get-offsets`` (latest, earliest, max-timestamp
  or by-time offsets), ``configs`` (describe / alter topic and broker configs), ``log-dirs``,
  ``delete-records``, ``metadata-quorum`` (DescribeQuorum from the voters) and
  ``producer-perf-test`` / ``consumer-perf-test``. Exit status: 0
  done, 1 the operation failed (for ``verify-replicas`` also: replicas diverge or one cannot
  be read), 2 usage error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

__all__ = ["build_parser", "main"]


def build_parser() -> tuple[
    argparse.ArgumentParser, dict[str, Callable[[argparse.Namespace], int]]
]:
    """The ``replog`` parser and, by command name, the runner of each operator tool (also what
    the documentation's CLI reference is generated from)."""
    parser = argparse.ArgumentParser(prog="replog", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    dump = commands.add_parser("dump-log", help="print the batches and index entries of a log")
    dump.add_argument("paths", nargs="+", metavar="PATH", help=".log/.index/.timeindex or a dir")
    dump.add_argument("--print-data", action="store_true", help="also print every record")
    dump.add_argument(
        "--cluster-metadata-decoder",
        action="store_true",
        help="the records of the metadata log (__cluster_metadata-0) as quorum commands",
    )
    broker = commands.add_parser("broker", help="run one broker until SIGTERM/SIGINT")
    from replog.broker.__main__ import add_broker_arguments

    add_broker_arguments(broker)
    controller = commands.add_parser("controller", help="run one voter of the metadata quorum")
    from replog.quorum.main import add_controller_arguments

    add_controller_arguments(controller)
    from replog.tools import register_tools

    return parser, register_tools(commands)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit status."""
    parser, tools = build_parser()
    args = parser.parse_args(argv)
    if args.command in tools:
        return tools[args.command](args)

    if args.command == "broker":
        from replog.broker.__main__ import run_broker

        return run_broker(args.config, log_level=args.log_level)
    if args.command == "controller":
        from replog.quorum.main import run_controller

        return run_controller(args)

    if args.command == "dump-log":
        from replog.log.dump import dump_path
        from replog.quorum.record_text import metadata_record_text

        decoder = metadata_record_text if args.cluster_metadata_decoder else None
        problems = 0
        for path in args.paths:
            try:
                problems += dump_path(path, sys.stdout, print_data=args.print_data, decoder=decoder)
            except (OSError, ValueError) as exc:
                print(f"replog dump-log: {exc}", file=sys.stderr)
                return 2
        return 1 if problems else 0
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
