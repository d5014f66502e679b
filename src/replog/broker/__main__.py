"""``python -m replog.broker --config FILE``: run one broker in this process until a signal.

The config file is TOML (``*.toml``) or JSON, read by ``BrokerConfig.from_file``; the
coordination backend is its ``coordinator`` URL: ``raft://host:port,...`` (the built-in
quorum, ``replog controller`` voters; the one to use without an external store),
``zookeeper://host:port/chroot`` or ``etcd://host:port/prefix``. A file that names neither a
``coordinator`` nor ``controller_voters`` is refused (exit status 2): the library default
``memory://default`` is a store inside one process, so two broker processes started that way
would each form a cluster of one without a word. A single broker process on purpose says
``coordinator = "memory://"``.

Combined mode (Kafka's ``process.roles=broker,controller``): with ``process_roles =
["broker", "controller"]`` and ``controller_voters = "1@host:port,2@host:port,3@host:port"``
the process first starts its own voter of the built-in metadata quorum (node id =
``broker_id``, on its address in the list, metadata log in ``controller_data_dir``) on a thread
of its own, then the broker on ``raft://`` over every voter. Three such processes are a whole
cluster with no other service. The voter stops after the broker (a controlled shutdown needs
the quorum), resigning its leadership first.

Once the broker serves, one JSON line goes to stdout, so a parent process can read the bound
address (``port = 0`` in the config picks a free port)::

    {"event": "serving", "broker_id": 1, "host": "127.0.0.1", "port": 40123,
     "address": "127.0.0.1:40123", "pid": 4242}

(with ``"controller_port"``, the voter's, in combined mode).

Signals: SIGTERM and SIGINT stop the broker with a controlled shutdown (leadership moves away,
then flush, checkpoints, clean-shutdown marker); a second SIGTERM/SIGINT during that stops at
once without moving leadership (still flushing and checkpointing). A last JSON line
``{"event": "stopped", ...}`` follows. SIGKILL is a crash, as for any process.

A broker whose own work fails in a way it cannot skip (``replog.broker.shell.supervision``: a
metadata application that raised, say) logs it CRITICAL, stops itself as a crash would (clients
fail over) and the process ends with ``{"event": "failed", ...}``.

Exit status: 0 after a stop, 1 when the broker could not start (the reason on stderr), 2 on a
bad config file, 3 when the broker failed while running (the reason on stderr).
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
from collections.abc import Callable, Sequence

from replog.broker.config import BrokerConfig
from replog.broker.shell.broker import Broker
from replog.errors import InvalidConfigError
from replog.event_loop import run
from replog.quorum.local import QuorumThread
from replog.quorum.server import VoterConfig

__all__ = [
    "add_broker_arguments",
    "load_process_config",
    "main",
    "run_broker",
    "serve",
    "start_voter",
]

_log = logging.getLogger("replog.broker")


def _emit(event: str, broker: Broker, **extra: object) -> None:
    """One JSON line on stdout, flushed at once (the parent reads it line by line)."""
    line = {
        "event": event,
        "broker_id": broker.broker_id,
        "host": broker.config.host,
        "port": broker.port,
        "address": broker.address,
        "pid": os.getpid(),
        **extra,
    }
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def start_voter(config: BrokerConfig) -> QuorumThread:
    """Combined mode: this process's voter of the metadata quorum, on its own loop thread."""
    voter = VoterConfig(
        node_id=config.broker_id,
        voters=config.controller_voter_addresses(),
        data_dir=config.controller_data_path(),
        **dict(config.quorum),
    )
    voter.raft_config()  # validates the timeouts
    return QuorumThread.start(voter)


async def serve(
    config: BrokerConfig,
    *,
    on_serving: Callable[[Broker], None] | None = None,
) -> int:
    """Start a broker from ``config`` (after its voter, in combined mode), report it, and run
    until SIGTERM/SIGINT; returns the exit status. ``on_serving`` runs on the loop once the
    broker serves (wrappers such as the fault suite's power-loss broker install their own
    signal handlers there)."""
    voter: QuorumThread | None = None
    if config.is_controller:
        try:
            voter = await asyncio.to_thread(start_voter, config)
        except Exception as exc:
            print(
                f"replog broker {config.broker_id}: cannot start its voter: {exc}", file=sys.stderr
            )
            return 1
    try:
        return await _serve_broker(config, on_serving, voter)
    finally:
        if voter is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(voter.stop)


async def _serve_broker(
    config: BrokerConfig,
    on_serving: Callable[[Broker], None] | None,
    voter: QuorumThread | None,
) -> int:
    loop = asyncio.get_running_loop()
    try:
        broker = Broker(config)
    except Exception as exc:  # e.g. an unknown or unreachable coordinator
        print(f"replog broker {config.broker_id}: cannot start: {exc}", file=sys.stderr)
        return 1
    stop_requests: asyncio.Queue[signal.Signals] = asyncio.Queue(maxsize=8)

    def on_signal(signum: signal.Signals) -> None:
        with contextlib.suppress(asyncio.QueueFull):
            stop_requests.put_nowait(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        try:
            await broker.start()
        except Exception as exc:
            print(f"replog broker {config.broker_id}: cannot start: {exc}", file=sys.stderr)
            with contextlib.suppress(Exception):
                await broker.kill()
            return 1
        if voter is not None and voter.server is not None:
            _emit("serving", broker, controller_port=voter.server.port)
        else:
            _emit("serving", broker)
        if on_serving is not None:
            on_serving(broker)
        signalled = asyncio.ensure_future(stop_requests.get())
        failed = asyncio.ensure_future(broker.wait_failed())
        await asyncio.wait({signalled, failed}, return_when=asyncio.FIRST_COMPLETED)
        if failed.done():  # the broker stopped itself: a step that must not fail raised
            signalled.cancel()
            print(
                f"replog broker {config.broker_id}: failed and stopped: {failed.result()!r}",
                file=sys.stderr,
            )
            _emit("failed", broker, error=repr(failed.result()))
            return 3
        failed.cancel()
        first = signalled.result()
        _log.info("broker %s: %s, controlled shutdown", config.broker_id, first.name)
        controlled = asyncio.ensure_future(broker.stop(controlled=True))
        second = asyncio.ensure_future(stop_requests.get())
        await asyncio.wait({controlled, second}, return_when=asyncio.FIRST_COMPLETED)
        if not controlled.done():
            _log.warning(
                "broker %s: second signal, stopping without moving leaders", config.broker_id
            )
            controlled.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await controlled
            await broker.stop(controlled=False)
        else:
            second.cancel()
            controlled.result()
        _emit("stopped", broker, signal=first.name)
        return 0
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
        close = getattr(broker.coordinator, "close", None)
        if callable(close):
            with contextlib.suppress(Exception):
                close()


def run_broker(config_path: str, *, log_level: str = "INFO") -> int:
    """Load ``config_path`` and serve (the body of both ``python -m replog.broker`` and
    ``replog broker``)."""
    logging.basicConfig(
        level=getattr(logging, log_level.upper(), logging.INFO),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        config = load_process_config(config_path)
    except InvalidConfigError as exc:
        print(f"replog broker: {exc}", file=sys.stderr)
        return 2
    return run(serve(config))


def load_process_config(config_path: str) -> BrokerConfig:
    """``BrokerConfig.from_file``, refusing a file that names no shared coordinator (neither
    ``coordinator`` nor ``controller_voters``; the module docstring says why)."""
    values = BrokerConfig.read_file(config_path)
    if "coordinator" not in values and "controller_voters" not in values:
        raise InvalidConfigError(
            f"{config_path} names no coordinator: a broker process needs one it shares with "
            'the other brokers -- coordinator = "raft://host:port,..." (`replog controller` '
            'voters), process_roles = ["broker", "controller"] with controller_voters '
            '(combined mode), zookeeper:// or etcd://; coordinator = "memory://" runs a '
            "single-broker cluster inside this one process"
        )
    return BrokerConfig.from_mapping(values)


def add_broker_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the broker command (shared with ``replog broker``)."""
    parser.add_argument("--config", required=True, metavar="FILE", help="broker config file")
    parser.add_argument(
        "--log-level", default="INFO", help="logging level on stderr (default INFO)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m replog.broker --config FILE [--log-level LEVEL]``."""
    parser = argparse.ArgumentParser(
        prog="python -m replog.broker", description="run one replog broker until SIGTERM"
    )
    add_broker_arguments(parser)
    args = parser.parse_args(argv)
    return run_broker(args.config, log_level=args.log_level)


if __name__ == "__main__":
    sys.exit(main())
