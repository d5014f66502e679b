"""``replog controller``: run one voter of the built-in metadata quorum until a signal.

    replog controller --node-id 1 --voters 1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095 \\
        --data-dir /var/lib/replog/controller-1

Every voter is started with the same ``--voters`` list; brokers then use
``coordinator = "raft://127.0.0.1:9093,127.0.0.1:9094,127.0.0.1:9095"``. The metadata log,
its ``quorum-state`` and snapshots live in ``<data-dir>/__cluster_metadata-0``; a restarted
voter recovers from them.

Once the voter listens, one JSON line goes to stdout (for a parent process)::

    {"event": "serving", "node_id": 1, "host": "127.0.0.1", "port": 9093, "pid": 4242}

SIGTERM or SIGINT stops it cleanly (a leader resigns first, so the others elect a successor at
once; then the log is flushed and closed) and prints ``{"event": "stopped", ...}``. Exit status: 0
after a stop, 1 when it could not start or its storage failed, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence

from replog.errors import InvalidConfigError
from replog.quorum.server import QuorumServer, VoterConfig, parse_voters

__all__ = ["add_controller_arguments", "main", "run_controller"]

_log = logging.getLogger("replog.controller")


def add_controller_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``replog controller``."""
    parser.add_argument("--node-id", type=int, required=True, help="this voter's id")
    parser.add_argument(
        "--voters", required=True, help="every voter: id@host:port,id@host:port,..."
    )
    parser.add_argument("--data-dir", required=True, help="where this voter keeps its log")
    parser.add_argument("--election-timeout-ms", type=int, default=1_000)
    parser.add_argument("--fetch-timeout-ms", type=int, default=2_000)
    parser.add_argument("--request-timeout-ms", type=int, default=2_000)
    parser.add_argument(
        "--snapshot-interval",
        type=int,
        default=10_000,
        help="records applied between two snapshots of the metadata (0: never)",
    )
    parser.add_argument("--log-level", default="INFO", help="logging level (stderr)")


def _emit(event: str, server: QuorumServer, **extra: object) -> None:
    host, _ = server.config.address
    line = {
        "event": event,
        "node_id": server.config.node_id,
        "host": host,
        "port": server.port,
        "pid": os.getpid(),
        **extra,
    }
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


async def serve(config: VoterConfig) -> int:
    """Run one voter until SIGTERM/SIGINT (or a storage failure); the exit status."""
    loop = asyncio.get_running_loop()
    try:
        server = await QuorumServer.start(config)
    except Exception as exc:
        print(f"replog controller {config.node_id}: cannot start: {exc}", file=sys.stderr)
        return 1
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        _emit("serving", server)
        stopped = asyncio.ensure_future(server.stopped.wait())
        requested = asyncio.ensure_future(stop.wait())
        await asyncio.wait({stopped, requested}, return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        requested.cancel()
        if server.failed is not None:
            print(f"replog controller {config.node_id}: {server.failed}", file=sys.stderr)
            return 1
        await server.stop()
        _emit("stopped", server)
        return 0
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(signum)


def run_controller(args: argparse.Namespace) -> int:
    """The body of ``replog controller`` (arguments from `add_controller_arguments`)."""
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        config = VoterConfig(
            node_id=args.node_id,
            voters=parse_voters(args.voters),
            data_dir=args.data_dir,
            election_timeout_ms=args.election_timeout_ms,
            fetch_timeout_ms=args.fetch_timeout_ms,
            request_timeout_ms=args.request_timeout_ms,
            snapshot_interval=args.snapshot_interval,
        )
        config.raft_config()  # validates the timeouts
    except InvalidConfigError as exc:
        print(f"replog controller: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(serve(config))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m replog.quorum.main``: the same as ``replog controller``."""
    parser = argparse.ArgumentParser(prog="replog controller", description=__doc__)
    add_controller_arguments(parser)
    return run_controller(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
