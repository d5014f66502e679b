"""Replica Fetch codec micro-benchmark: ``python -m benchmarks.fetch_codec``.

One follower fetch round's codec work, both sides, for a follower of ``--partitions``
partitions of one topic on a leader, each answered with one ``--records``-record batch of
100-byte records: the follower builds and encodes its Fetch v12 request, the leader decodes it
and encodes its answer, the follower decodes the answer. Each step is timed with the generic
compiled codec and with the fixed-layout Fetch v12 codec (``replog.protocol.fetch_v12``),
alternately in one process, in thread CPU time (so other processes on a shared machine do not
count), best of ``--repeats``; one JSON line per codec with the microseconds per step and the
round's total.
"""

from __future__ import annotations

import argparse
import json
import time
import timeit
from collections.abc import Callable

from replog.broker.driver.convert import follower_fetch_request
from replog.isr import PartitionFetchRequest
from replog.log import encode_batch
from replog.protocol import (
    RequestHeader,
    compiled,
    decode_request,
    decode_response,
    encode_request,
    encode_response_parts,
)
from replog.protocol import messages as m

VERSION = 12


def steps(partitions: int, records: int) -> dict[str, Callable[[], object]]:
    """The round's four codec steps, as calls."""
    batch = encode_batch([b"x" * 100] * records, base_timestamp=1)
    requests = [
        (
            ("bench", p),
            PartitionFetchRequest(
                request_id=1,
                replica_id=2,
                fetch_offset=1000,
                max_bytes=1 << 20,
                current_leader_epoch=3,
                last_fetched_epoch=3,
                log_start_offset=0,
            ),
        )
        for p in range(partitions)
    ]
    header = RequestHeader(api_key=1, api_version=VERSION, correlation_id=5, client_id="replica-2")

    def encode_fetch() -> bytes:
        body = follower_fetch_request(2, requests, max_wait_ms=500, min_bytes=1, max_bytes=1 << 23)
        return encode_request(header, body)

    request_body = memoryview(encode_fetch())[4:]
    answer = m.FetchResponse(
        responses=[
            m.FetchResponseTopic(
                topic="bench",
                partitions=[
                    m.FetchResponsePartition(
                        partition_index=p,
                        error_code=0,
                        high_watermark=999,
                        last_stable_offset=999,
                        log_start_offset=0,
                        records=batch,
                    )
                    for p in range(partitions)
                ],
            )
        ]
    )
    response_frame = b"".join(
        p for p in encode_response_parts(5, VERSION, answer) if isinstance(p, bytes)
    )
    response_body = memoryview(response_frame)[4:]
    return {
        "follower_encode_us": encode_fetch,
        "leader_decode_us": lambda: decode_request(request_body),
        "leader_encode_us": lambda: encode_response_parts(5, VERSION, answer),
        "follower_decode_us": lambda: decode_response(
            response_body, api_key=1, api_version=VERSION
        ),
    }


def main() -> None:
    """Parse the options, time both codecs alternately, print one line per codec."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--records", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--number", type=int, default=3000)
    args = parser.parse_args()
    calls = steps(args.partitions, args.records)
    fast = (dict(compiled._FAST_ENCODERS), dict(compiled._FAST_DECODERS))
    best: dict[str, dict[str, float]] = {"generic": {}, "fetch_v12": {}}
    for _ in range(2):
        for codec in ("generic", "fetch_v12"):
            compiled._FAST_ENCODERS.clear()
            compiled._FAST_DECODERS.clear()
            if codec == "fetch_v12":
                compiled._FAST_ENCODERS.update(fast[0])
                compiled._FAST_DECODERS.update(fast[1])
            for name, call in calls.items():
                timer = timeit.Timer(call, timer=time.thread_time)
                us = min(timer.repeat(number=args.number, repeat=args.repeats)) / args.number * 1e6
                best[codec][name] = min(us, best[codec].get(name, us))
    for codec, figures in best.items():
        line = {"codec": codec, "partitions": args.partitions, "records": args.records}
        line.update({k: round(v, 1) for k, v in figures.items()})
        line["round_us"] = round(sum(figures.values()), 1)
        print(json.dumps(line))


if __name__ == "__main__":
    main()
