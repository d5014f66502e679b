"""``recompress_batches``: a topic's ``compression.type`` applied to what a producer sent."""

from __future__ import annotations

import pytest

from replog.errors import CorruptRecordError
from replog.log import decode_records, encode_batch
from replog.log.batch_rewrite import recompress_batches
from replog.log.compression import Compression
from replog.log.records import iter_batches, read_header, validate_batch


def _batch(compression: Compression, base_offset: int = 0) -> bytes:
    return encode_batch(
        [b"a" * 50, None, b"c" * 50],
        keys=[b"k1", None, b"k3"],
        headers=[(("h", b"v"),), (), ()],
        timestamps=[1_000, 1_005, 999],
        base_timestamp=1_000,
        base_offset=base_offset,
        compression=compression,
        producer_id=7,
        producer_epoch=2,
        base_sequence=11,
    )


@pytest.mark.parametrize("source", list(Compression))
@pytest.mark.parametrize("target", list(Compression))
def test_every_codec_pair_keeps_records_and_header_fields(
    source: Compression, target: Compression
) -> None:
    sent = _batch(source) + _batch(source, base_offset=3)
    stored = recompress_batches(sent, target)
    before = [h for _, h in iter_batches(sent)]
    after = [validate_batch(stored, p) for p, _ in iter_batches(stored)]  # CRCs hold
    assert [h.compression for h in after] == [target, target]
    for old, new in zip(before, after, strict=True):
        for field in ("base_offset", "last_offset_delta", "base_timestamp", "max_timestamp"):
            assert getattr(new, field) == getattr(old, field)
        assert (new.producer_id, new.producer_epoch, new.base_sequence) == (7, 2, 11)
        assert new.records_count == old.records_count
    assert [decode_records(stored, p) for p, _ in iter_batches(stored)] == [
        decode_records(sent, p) for p, _ in iter_batches(sent)
    ]
    if source == target:
        assert stored == sent  # byte for byte


def test_a_damaged_batch_is_refused() -> None:
    sent = bytearray(_batch(Compression.NONE))
    sent[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        recompress_batches(bytes(sent), Compression.GZIP)


def test_a_partial_batch_at_the_end_is_refused() -> None:
    whole = _batch(Compression.NONE)
    with pytest.raises(CorruptRecordError):
        recompress_batches(whole + whole[:30], Compression.GZIP)
    assert read_header(recompress_batches(whole, Compression.GZIP)).compression == (
        Compression.GZIP
    )
