"""The pure Spark planner: offset specs, pinned ranges, and Spark's range splitting.

The hand-computed split cases are those of Spark's ``KafkaOffsetRangeCalculatorSuite`` plus the
layouts measured with Spark itself (a 261000-record RDD and a bounded DataSource read); the
property tests check what every plan must keep (exact cover, contiguous pieces, the min/max
bounds) for arbitrary inputs.
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
import zlib
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from replog.errors import InvalidConfigError, InvalidOffsetError, ReplogError
from replog.spark import (
    EARLIEST,
    LATEST,
    DataLossError,
    DataLossWarning,
    OffsetRange,
    OffsetSource,
    OffsetSpec,
    OffsetSpecError,
    TopicPartition,
    offsets_to_json,
    parse_offsets,
    plan_ranges,
    resolve_ranges,
)


@attrs.define
class FakeSource:
    """An in-memory cluster: per partition, its (log start offset, high watermark)."""

    logs: dict[TopicPartition, tuple[int, int]]
    calls: list[str] = attrs.field(factory=list)

    @classmethod
    def of(cls, **topics: Sequence[tuple[int, int]]) -> FakeSource:
        return cls(
            {TopicPartition(t, p): ends for t, ps in topics.items() for p, ends in enumerate(ps)}
        )

    def list_partitions(self, topics: Collection[str] | None = None) -> Mapping[str, Sequence[int]]:
        self.calls.append("list_partitions")
        found: dict[str, list[int]] = {}
        for tp in sorted(self.logs):
            if topics is None or tp.topic in topics:
                found.setdefault(tp.topic, []).append(tp.partition)
        return found

    def log_start_offsets(
        self, partitions: Collection[TopicPartition]
    ) -> Mapping[TopicPartition, int]:
        self.calls.append("log_start_offsets")
        return {tp: self.logs[tp][0] for tp in partitions}

    def high_watermarks(
        self, partitions: Collection[TopicPartition]
    ) -> Mapping[TopicPartition, int]:
        self.calls.append("high_watermarks")
        return {tp: self.logs[tp][1] for tp in partitions}


def _source_is_an_offset_source(source: FakeSource) -> OffsetSource:
    return source  # mypy checks the fake against the protocol


def spans(ranges: Sequence[OffsetRange]) -> list[tuple[str, int, int, int]]:
    return [(r.topic, r.partition, r.from_offset, r.until_offset) for r in ranges]


# --- OffsetRange -------------------------------------------------------------------------------


def test_offset_range_counts_from_inclusive_to_exclusive() -> None:
    r = OffsetRange("t", 0, 10, 25)
    assert r.count == 15
    assert r.is_resolved
    assert r.topic_partition == TopicPartition("t", 0) == ("t", 0)
    assert r.preferred_location is None


def test_offset_range_is_frozen() -> None:
    r = OffsetRange("t", 0, 0, 1)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        r.from_offset = 5  # type: ignore[misc]


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("t", -1, 0, 1), "partition is negative"),
        (("t", True, 0, 1), "partition must be an int"),
        (("t", 0, 5, 4), "from_offset 5 is past until_offset 4"),
        (("t", 0, -3, 4), "offset -3 is negative"),
        (("t", 0, 0, EARLIEST), "offset -2 is negative"),
        (("t", 0, 1.5, 4), "not an integer"),
        (("t", 0, 0, 2**63), "int64"),
    ],
)
def test_offset_range_rejects_bad_fields(args: tuple[Any, ...], match: str) -> None:
    with pytest.raises(InvalidOffsetError, match=match):
        OffsetRange(*args)


def test_unresolved_range_has_no_count() -> None:
    r = OffsetRange("t", 0, EARLIEST, LATEST)
    assert not r.is_resolved
    with pytest.raises(InvalidOffsetError, match="unresolved"):
        _ = r.count


# --- parse_offsets / offsets_to_json -----------------------------------------------------------


@pytest.mark.parametrize(("text", "default"), [("earliest", EARLIEST), (" LATEST ", LATEST)])
def test_parse_offsets_words(text: str, default: int) -> None:
    spec = parse_offsets(text, default=EARLIEST if default == LATEST else LATEST)
    assert spec == OffsetSpec(default)
    assert spec.offset_for("any", 3) == default


def test_parse_offsets_json_uses_default_for_missing_partitions() -> None:
    spec = parse_offsets('{"topicA": {"0": 23, "1": -2}, "topicB": {"0": -1}}', default=LATEST)
    assert spec.offsets == {"topicA": {0: 23, 1: EARLIEST}, "topicB": {0: LATEST}}
    assert spec.offset_for("topicA", 0) == 23
    assert spec.offset_for("topicA", 1) == EARLIEST
    assert spec.offset_for("topicA", 2) == LATEST
    assert spec.offset_for("other", 0) == LATEST


def test_parse_offsets_accepts_mappings_with_str_or_int_keys() -> None:
    spec = parse_offsets({"t": {"0": 5, 1: 7}}, default=EARLIEST)
    assert spec.offsets == {"t": {0: 5, 1: 7}}
    assert parse_offsets(spec, default=LATEST) == spec


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("nonsense", "neither 'earliest', 'latest' nor offset JSON"),
        ("[1, 2]", "expected a JSON object of topics, got list"),
        ('{"t": [1]}', "topic 't' maps to list"),
        ('{"t": {"x": 1}}', "partition key 'x'"),
        ('{"t": {"-1": 1}}', "partition key '-1'"),
        ('{"t": {"01": 1}}', "partition key '01'"),
        ('{"t": {"0": "5"}}', r"t-0: offset '5' is not an integer"),
        ('{"t": {"0": 5.0}}', r"t-0: offset 5.0 is not an integer"),
        ('{"t": {"0": true}}', r"t-0: offset True is not an integer"),
        ('{"t": {"0": null}}', r"t-0: offset None is not an integer"),
        ('{"t": {"3": -3}}', r"t-3: offset -3 is negative and not -2 or -1"),
        ('{"t": {"0": 9223372036854775808}}', "int64"),
        ('{"": {"0": 1}}', "topic name is empty"),
        ('{"bad topic": {"0": 1}}', "characters outside"),
    ],
)
def test_parse_offsets_rejects_bad_json(spec: str, match: str) -> None:
    with pytest.raises(OffsetSpecError, match=match) as caught:
        parse_offsets(spec, default=EARLIEST, name="startingOffsets")
    assert str(caught.value).startswith("startingOffsets: ")
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, InvalidConfigError)


def test_parse_offsets_rejects_duplicate_partitions_in_a_mapping() -> None:
    with pytest.raises(OffsetSpecError, match="t-1 is given twice"):
        parse_offsets({"t": {"1": 5, 1: 6}}, default=EARLIEST)


@pytest.mark.parametrize(
    ("text", "key"), [('{"t": {"0": 1, "0": 2}}', "'0'"), ('{"t": {}, "t": {"0": 1}}', "'t'")]
)
def test_parse_offsets_rejects_duplicate_json_keys(text: str, key: str) -> None:
    with pytest.raises(OffsetSpecError, match=f"^endingOffsets: key {key} is given twice"):
        parse_offsets(text, default=EARLIEST, name="endingOffsets")


def test_offset_spec_default_must_be_a_sentinel() -> None:
    with pytest.raises(OffsetSpecError, match="not 5"):
        OffsetSpec(5)


def test_parse_offsets_rejects_unknown_topics_when_topics_are_given() -> None:
    with pytest.raises(OffsetSpecError, match=r"topics \['b'\] are not in the subscription"):
        parse_offsets('{"a": {"0": 1}, "b": {"0": 1}}', default=EARLIEST, topics={"a"})


def test_parse_offsets_rejects_a_default_that_is_not_a_sentinel() -> None:
    with pytest.raises(OffsetSpecError, match="default must be EARLIEST"):
        parse_offsets("earliest", default=0)


def test_offsets_to_json_is_sparks_compact_sorted_format() -> None:
    text = offsets_to_json({"b": {10: 1, 2: -1}, "a": {0: 23}})
    assert text == '{"a":{"0":23},"b":{"2":-1,"10":1}}'


def test_offsets_to_json_rejects_invalid_offsets() -> None:
    with pytest.raises(OffsetSpecError, match="t-0: offset -7"):
        offsets_to_json({"t": {0: -7}})


offset_values = st.one_of(st.sampled_from([EARLIEST, LATEST]), st.integers(0, 2**63 - 1))
topic_names = st.from_regex(r"[a-zA-Z0-9._-]{1,20}", fullmatch=True).filter(
    lambda t: t not in (".", "..")
)
offset_maps = st.dictionaries(
    topic_names, st.dictionaries(st.integers(0, 10_000), offset_values, max_size=5), max_size=5
)


@given(offset_maps)
def test_offsets_json_round_trips(offsets: dict[str, dict[int, int]]) -> None:
    text = offsets_to_json(offsets)
    assert parse_offsets(text, default=EARLIEST).offsets == offsets
    assert json.loads(text) == {t: {str(p): o for p, o in ps.items()} for t, ps in offsets.items()}
    assert offsets_to_json(parse_offsets(text, default=LATEST).offsets) == text


# --- resolve_ranges ----------------------------------------------------------------------------


def test_resolve_pins_earliest_and_latest_to_log_start_and_hw() -> None:
    source = FakeSource.of(a=[(0, 100), (5, 50)], b=[(0, 0)])
    resolved = resolve_ranges(source, subscribe="a,b")
    assert spans(resolved.ranges) == [("a", 0, 0, 100), ("a", 1, 5, 50), ("b", 0, 0, 0)]
    assert resolved.warnings == ()
    # log start first, then the HW: a log start that only grows can never pass the HW read later
    assert source.calls == ["list_partitions", "log_start_offsets", "high_watermarks"]


def test_resolved_ranges_stay_pinned_when_the_log_grows() -> None:
    source = FakeSource.of(a=[(0, 100), (0, 40)])
    resolved = resolve_ranges(source, subscribe=["a"])
    plan = plan_ranges(resolved.ranges, min_partitions=5)
    source.logs[TopicPartition("a", 0)] = (0, 500)  # appends after planning
    # a retried task re-reads the same planned range: nothing about it depends on the source now
    assert plan_ranges(resolved.ranges, min_partitions=5) == plan
    assert sum(r.count for r in plan) == 140
    assert max(r.until_offset for r in plan if r.partition == 0) == 100


def test_resolve_explicit_json_offsets_with_defaults() -> None:
    source = FakeSource.of(a=[(0, 100), (10, 50), (0, 30)])
    resolved = resolve_ranges(
        source,
        subscribe="a",
        starting='{"a": {"0": 23, "1": -2}}',
        ending={"a": {"0": 60}},
    )
    assert spans(resolved.ranges) == [("a", 0, 23, 60), ("a", 1, 10, 50), ("a", 2, 0, 30)]


def test_resolve_subscribe_pattern_matches_whole_names() -> None:
    source = FakeSource.of(events=[(0, 3)], events2=[(0, 4)], xevents=[(0, 5)])
    resolved = resolve_ranges(source, subscribe_pattern="events.*")
    assert [r.topic for r in resolved.ranges] == ["events", "events2"]
    assert resolve_ranges(source, subscribe_pattern="nothing").ranges == ()


def test_resolve_assign_reads_only_the_named_partitions() -> None:
    source = FakeSource.of(a=[(0, 10), (0, 20), (0, 30)], b=[(0, 5)])
    resolved = resolve_ranges(source, assign='{"a": [2, 0]}')
    assert spans(resolved.ranges) == [("a", 0, 0, 10), ("a", 2, 0, 30)]
    assert spans(resolve_ranges(source, assign={"b": [0]}).ranges) == [("b", 0, 0, 5)]


def test_start_below_log_start_is_data_loss() -> None:
    source = FakeSource.of(a=[(40, 100)])
    with pytest.raises(DataLossError, match=r"offset 10 is below the log start offset 40") as e:
        resolve_ranges(source, subscribe="a", starting='{"a": {"0": 10}}')
    assert (e.value.topic, e.value.partition, e.value.offset, e.value.log_start_offset) == (
        "a",
        0,
        10,
        40,
    )
    assert isinstance(e.value, ReplogError)


def test_data_loss_clamps_and_warns_when_not_failing() -> None:
    source = FakeSource.of(a=[(40, 100), (0, 10)])
    resolved = resolve_ranges(
        source, subscribe="a", starting='{"a": {"0": 10, "1": 3}}', fail_on_data_loss=False
    )
    assert spans(resolved.ranges) == [("a", 0, 40, 100), ("a", 1, 3, 10)]
    assert resolved.warnings == (DataLossWarning("a", 0, 10, 40),)
    assert "[10, 40)" in resolved.warnings[0].message


def test_end_below_log_start_is_data_loss_or_an_empty_range() -> None:
    source = FakeSource.of(a=[(40, 100)])
    with pytest.raises(DataLossError, match="offset 30 is below"):
        resolve_ranges(source, subscribe="a", ending='{"a": {"0": 30}}')
    resolved = resolve_ranges(
        source, subscribe="a", ending='{"a": {"0": 30}}', fail_on_data_loss=False
    )
    assert spans(resolved.ranges) == [("a", 0, 40, 40)]
    assert plan_ranges(resolved.ranges) == []


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "exactly one of subscribe, subscribePattern, assign"),
        ({"subscribe": "a", "assign": '{"a": [0]}'}, "exactly one"),
        ({"subscribe": "a", "subscribe_pattern": "a"}, "exactly one"),
        ({"subscribe": ""}, "names no topic"),
        ({"subscribe": " , "}, "names no topic"),
        ({"subscribe": ["a", 1]}, "not a list of topic names"),
        ({"subscribe": "a,missing"}, r"topics \['missing'\] do not exist"),
        ({"subscribe_pattern": "("}, "subscribePattern"),
        ({"subscribe_pattern": ""}, "pattern is empty"),
        ({"assign": "{"}, "assign: .* is not JSON"),
        ({"assign": "{}"}, "assign: expected"),
        ({"assign": '{"a": [0], "a": [1]}'}, "assign: key 'a' is given twice"),
        ({"assign": '{"a": 0}'}, "needs a list of partition ids"),
        ({"assign": '{"a": ["0"]}'}, "'0' in topic 'a' is not a partition id"),
        ({"assign": '{"a": [-1]}'}, "-1 in topic 'a' is not a partition id"),
        ({"assign": '{"a": [7]}'}, "partitions a-7 do not exist"),
        ({"assign": '{"zz": [0]}'}, "partitions zz-0 do not exist"),
    ],
)
def test_resolve_rejects_bad_subscriptions(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(OffsetSpecError, match=match):
        resolve_ranges(FakeSource.of(a=[(0, 10)]), **kwargs)


@pytest.mark.parametrize("kwargs", [{"assign": {"a b": [0]}}, {"subscribe": "a, a b"}])
def test_subscriptions_reject_bad_topic_names(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="characters outside"):
        resolve_ranges(FakeSource.of(a=[(0, 10)]), **kwargs)


def test_subscribe_ignores_blank_names_and_duplicates_like_spark() -> None:
    resolved = resolve_ranges(FakeSource.of(a=[(0, 10)]), subscribe=" a,, a ,")
    assert spans(resolved.ranges) == [("a", 0, 0, 10)]


@pytest.mark.parametrize(
    ("starting", "ending", "match"),
    [
        ("latest", "latest", "startingOffsets: latest is not allowed in a batch query"),
        ('{"a": {"1": -1}}', "latest", r"startingOffsets: a-1 is latest \(-1\)"),
        ("earliest", "earliest", "endingOffsets: earliest is not allowed in a batch query"),
        ("earliest", '{"a": {"0": -2}}', r"endingOffsets: a-0 is earliest \(-2\)"),
        ('{"b": {"0": 1}}', "latest", r"startingOffsets: topics \['b'\] are not in the sub"),
        ('{"a": {"5": 1}}', "latest", "startingOffsets: partitions a-5 are not in the sub"),
        ("earliest", '{"a": {"9": 1}}', "endingOffsets: partitions a-9 are not in the sub"),
        ('{"a": {"0": 8}}', '{"a": {"0": 7}}', "a-0: starting offset 8 is past ending offset 7"),
        ('{"a": {"0": 80}}', "latest", r"starting offset 80 is past ending offset 50 \(the high"),
        ("earliest", '{"a": {"0": 51}}', "endingOffsets: a-0 is 51, past the high watermark 50"),
    ],
)
def test_resolve_rejects_offsets_a_batch_cannot_read(
    starting: str, ending: str, match: str
) -> None:
    source = FakeSource.of(a=[(0, 50), (0, 50)])
    with pytest.raises(OffsetSpecError, match=match):
        resolve_ranges(source, subscribe="a", starting=starting, ending=ending)


def test_inverted_explicit_offsets_are_a_spec_error_even_below_log_start() -> None:
    source = FakeSource.of(a=[(40, 100)])
    with pytest.raises(OffsetSpecError, match="starting offset 8 is past ending offset 7"):
        resolve_ranges(source, subscribe="a", starting='{"a":{"0":8}}', ending='{"a":{"0":7}}')


def test_start_equal_to_end_gives_an_empty_range() -> None:
    source = FakeSource.of(a=[(0, 50)])
    resolved = resolve_ranges(source, subscribe="a", starting='{"a":{"0":50}}')
    assert spans(resolved.ranges) == [("a", 0, 50, 50)]


# --- plan_ranges: Spark's hand-computed cases --------------------------------------------------


def rng(topic: str, start: int, end: int, partition: int = 1) -> OffsetRange:
    return OffsetRange(topic, partition, start, end)


@pytest.mark.parametrize(
    ("min_partitions", "ranges", "expected"),
    [
        # KafkaOffsetRangeCalculatorSuite, case by case
        (None, [rng("t1", 1, 2), rng("t2", 1, 1)], [rng("t1", 1, 2)]),
        (3, [rng("t1", 1, 2), rng("t2", 1, 2), rng("t3", 1, 2)],
         [rng("t1", 1, 2), rng("t2", 1, 2), rng("t3", 1, 2)]),
        (4, [rng("t1", 1, 5)],
         [rng("t1", 1, 2), rng("t1", 2, 3), rng("t1", 3, 4), rng("t1", 4, 5)]),
        (4, [rng("t1", 1, 5), rng("t2", 1, 21)],
         [rng("t1", 1, 5), rng("t2", 1, 7), rng("t2", 7, 14), rng("t2", 14, 21)]),
        (4, [rng("t1", 1, 1), rng("t2", 1, 21)],
         [rng("t2", 1, 6), rng("t2", 6, 11), rng("t2", 11, 16), rng("t2", 16, 21)]),
        (4, [rng("t1", 1, 2), rng("t2", 1, 1001)],
         [rng("t1", 1, 2), rng("t2", 1, 334), rng("t2", 334, 667), rng("t2", 667, 1001)]),
        (1, [rng("t1", 1, 5), rng("t2", 1, 21)], [rng("t1", 1, 5), rng("t2", 1, 21)]),
        (3, [rng("t1", 1, 11)], [rng("t1", 1, 4), rng("t1", 4, 7), rng("t1", 7, 11)]),
        # SPARK-28489: 10/20*5 = 2.5 rounds *up* (Java's Math.round), so 3 pieces each
        (6, [rng("t1", 0, 10), rng("t2", 0, 10), rng("t3", 0, 1)],
         [rng("t1", 0, 3), rng("t1", 3, 6), rng("t1", 6, 10),
          rng("t2", 0, 3), rng("t2", 3, 6), rng("t2", 6, 10), rng("t3", 0, 1)]),
        # SPARK-36576: small ranges are left out of the proportional math
        (9, [rng("t1", 0, 10000), rng("t2", 0, 15000), rng("t3", 0, 20000)],
         [rng("t1", 0, 5000), rng("t1", 5000, 10000),
          rng("t2", 0, 5000), rng("t2", 5000, 10000), rng("t2", 10000, 15000),
          rng("t3", 0, 5000), rng("t3", 5000, 10000), rng("t3", 10000, 15000),
          rng("t3", 15000, 20000)]),
        (6, [rng("t1", 0, 500), rng("t2", 0, 12000), rng("t3", 0, 15001)],
         [rng("t1", 0, 500), rng("t2", 0, 6000), rng("t2", 6000, 12000),
          rng("t3", 0, 5000), rng("t3", 5000, 10000), rng("t3", 10000, 15001)]),
        (6, [rng("t1", 0, 1), rng("t2", 0, 1), rng("t3", 0, 10000)],
         [rng("t1", 0, 1), rng("t2", 0, 1), rng("t3", 0, 2500), rng("t3", 2500, 5000),
          rng("t3", 5000, 7500), rng("t3", 7500, 10000)]),
    ],
)  # fmt: skip
def test_plan_matches_sparks_calculator(
    min_partitions: int | None, ranges: list[OffsetRange], expected: list[OffsetRange]
) -> None:
    assert plan_ranges(ranges, min_partitions=min_partitions) == expected


def test_plan_reproduces_the_measured_261000_record_layout() -> None:
    # Measured on Spark: 200k/50k/10k/1k records, minPartitions=8 -> 40k x5 + 50k + 10k + 1k
    ranges = [OffsetRange("t", p, 0, n) for p, n in enumerate([200_000, 50_000, 10_000, 1_000])]
    plan = plan_ranges(ranges, min_partitions=8)
    assert [(r.partition, r.count) for r in plan] == [(0, 40_000)] * 5 + [
        (1, 50_000),
        (2, 10_000),
        (3, 1_000),
    ]
    assert [r.from_offset for r in plan[:5]] == [0, 40_000, 80_000, 120_000, 160_000]


def test_plan_of_the_bounded_layout_rounds_half_up_like_spark() -> None:
    # Measured on Spark: {0: 150000, 1: 50000, 2: 10000, 3: 500}, minPartitions=8. The split
    # shares are 150000/200000*6 = 4.5 and 1.5; Math.round gives 5 and 2, so Spark plans 9 tasks
    # (Python's round() would give 4 and 2, i.e. 8).
    ranges = [
        OffsetRange("t", 0, 0, 150_000),
        OffsetRange("t", 1, 0, 50_000),
        OffsetRange("t", 2, 0, 10_000),
        OffsetRange("t", 3, 500, 1_000),
    ]
    plan = plan_ranges(ranges, min_partitions=8)
    assert [(r.partition, r.count) for r in plan] == [(0, 30_000)] * 5 + [(1, 25_000)] * 2 + [
        (2, 10_000),
        (3, 500),
    ]


def test_plan_tops_up_when_sparks_rounding_falls_short() -> None:
    # Spark: each share is round(1000/3000*4) = 1, so it would plan 3 tasks for minPartitions=4
    ranges = [OffsetRange("t", p, 0, 1000) for p in range(3)]
    plan = plan_ranges(ranges, min_partitions=4)
    assert spans(plan) == [
        ("t", 0, 0, 500),
        ("t", 0, 500, 1000),
        ("t", 1, 0, 1000),
        ("t", 2, 0, 1000),
    ]


def test_max_records_per_partition_cuts_ceil_count_over_max_pieces() -> None:
    plan = plan_ranges([OffsetRange("t", 0, 0, 10), OffsetRange("t", 1, 0, 3)],
                       max_records_per_partition=3)  # fmt: skip
    assert spans(plan) == [
        ("t", 0, 0, 2),
        ("t", 0, 2, 4),
        ("t", 0, 4, 7),
        ("t", 0, 7, 10),
        ("t", 1, 0, 3),
    ]
    assert all(r.preferred_location is None for r in plan)


def test_max_records_then_min_partitions() -> None:
    plan = plan_ranges(
        [OffsetRange("t", 0, 0, 100)], max_records_per_partition=60, min_partitions=4
    )
    assert [r.count for r in plan] == [25, 25, 25, 25]


def test_unresolved_ranges_are_never_split() -> None:
    late = OffsetRange("t", 0, EARLIEST, LATEST)
    half = OffsetRange("t", 1, 5, LATEST)
    big = OffsetRange("t", 2, 0, 100)
    plan = plan_ranges([late, half, big], min_partitions=6, max_records_per_partition=50)
    assert plan[:2] == [late, half]
    assert [r.count for r in plan[2:]] == [25, 25, 25, 25]
    assert plan_ranges([late], min_partitions=10) == [late]


def test_one_to_one_plans_get_a_consistent_executor() -> None:
    ranges = [OffsetRange("t", p, 0, 10) for p in range(6)]
    executors = ["host-c", "host-a", "host-b", "host-a"]
    plan = plan_ranges(ranges, executors=executors)
    hosts = ["host-a", "host-b", "host-c"]
    for r in plan:
        assert r.preferred_location == hosts[zlib.crc32(f"t-{r.partition}".encode()) % 3]
    assert plan == plan_ranges(ranges, executors=reversed(executors))  # order does not matter
    assert plan_ranges(ranges, min_partitions=6, executors=executors) == plan


def test_split_plans_have_no_locations_and_no_executors_keep_given_ones() -> None:
    fixed = [OffsetRange("t", 0, 0, 10, "fixed-host"), OffsetRange("t", 1, 0, 2, "other")]
    assert plan_ranges(fixed) == fixed
    split = plan_ranges(fixed, min_partitions=4, executors=["e1"])
    assert len(split) >= 4
    assert all(r.preferred_location is None for r in split)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"min_partitions": 0}, "min_partitions must be a positive integer, not 0"),
        ({"min_partitions": True}, "min_partitions must be a positive integer"),
        ({"min_partitions": 2.0}, "min_partitions must be a positive integer"),
        ({"max_records_per_partition": -5}, "max_records_per_partition must be a positive"),
    ],
)
def test_plan_rejects_bad_options(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(OffsetSpecError, match=re.escape(match)):
        plan_ranges([OffsetRange("t", 0, 0, 1)], **kwargs)


# --- plan_ranges: properties -------------------------------------------------------------------


@st.composite
def range_lists(draw: st.DrawFn) -> list[OffsetRange]:
    counts = draw(st.lists(st.integers(0, 5_000), max_size=8))
    ranges = []
    for partition, count in enumerate(counts):
        start = draw(st.integers(0, 10**12))
        ranges.append(
            OffsetRange(draw(st.sampled_from(["a", "b"])), partition, start, start + count)
        )
    return ranges


@given(
    range_lists(),
    st.none() | st.integers(1, 64),
    st.none() | st.integers(1, 3_000),
    st.lists(st.sampled_from(["e1", "e2", "e3"]), max_size=3),
)
def test_plans_cover_every_range_exactly(
    ranges: list[OffsetRange],
    min_partitions: int | None,
    max_records: int | None,
    executors: list[str],
) -> None:
    plan = plan_ranges(
        ranges,
        min_partitions=min_partitions,
        max_records_per_partition=max_records,
        executors=executors,
    )
    # pieces of each input range, in order, are contiguous, non-empty and cover it exactly
    by_partition: dict[int, list[OffsetRange]] = {}
    for piece in plan:
        by_partition.setdefault(piece.partition, []).append(piece)
    for r in ranges:
        pieces = by_partition.pop(r.partition, [])
        if r.count == 0:
            assert pieces == []
            continue
        assert all(p.topic == r.topic and p.count > 0 for p in pieces)
        assert pieces[0].from_offset == r.from_offset
        assert pieces[-1].until_offset == r.until_offset
        assert all(a.until_offset == b.from_offset for a, b in itertools.pairwise(pieces))
        assert sum(p.count for p in pieces) == r.count
    assert by_partition == {}
    total = sum(r.count for r in ranges)
    assert sum(p.count for p in plan) == total
    if max_records is not None:
        assert all(p.count <= max_records for p in plan)
    if min_partitions is not None and total >= min_partitions:
        assert len(plan) >= min_partitions
    split = len(plan) != len([r for r in ranges if r.count])
    if executors and not split:
        assert all(p.preferred_location in executors for p in plan)
    if split:
        assert all(p.preferred_location is None for p in plan)
    # deterministic: planning twice gives the same plan
    assert plan == plan_ranges(
        ranges,
        min_partitions=min_partitions,
        max_records_per_partition=max_records,
        executors=executors,
    )


@given(range_lists(), st.integers(1, 64))
def test_min_partitions_matches_spark_when_spark_meets_it(
    ranges: list[OffsetRange], min_partitions: int
) -> None:
    """Where Spark's own arithmetic reaches min_partitions, the top-up changes nothing."""
    plan = plan_ranges(ranges, min_partitions=min_partitions)
    spark = _spark_reference(ranges, min_partitions)
    if len(spark) >= min_partitions or sum(r.count for r in ranges) < min_partitions:
        assert spans(plan) == spans(spark)


def _spark_reference(ranges: list[OffsetRange], min_partitions: int) -> list[OffsetRange]:
    """A direct transcription of KafkaOffsetRangeCalculator.getRanges (minPartitions only)."""

    def java_round(x: float) -> int:
        return int(x) + (1 if x - int(x) >= 0.5 else 0)

    def part_count(size: int, total: int, parts: int) -> int:
        return max(java_round(float(size) / float(total) * parts), 1)

    kept = [r for r in ranges if r.count > 0]
    if len(kept) >= min_partitions:
        return kept
    total = sum(r.count for r in kept)
    unsplit = [i for i, r in enumerate(kept) if part_count(r.count, total, min_partitions) == 1]
    split_total = total - sum(kept[i].count for i in unsplit)
    split_min = max(min_partitions - len(unsplit), 1)
    out = []
    for i, r in enumerate(kept):
        parts = 1 if i in unsplit else part_count(r.count, split_total, split_min)
        remaining, start = r.count, r.from_offset
        for part in range(parts):
            size = remaining // (parts - part)
            remaining -= size
            end = min(start + size, r.until_offset)
            if end > start:
                out.append(OffsetRange(r.topic, r.partition, start, end))
            start = end
    return out


def test_the_planner_needs_neither_pyspark_nor_pyarrow() -> None:
    code = (
        "import sys, replog.spark, replog.spark.ranges; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'pyarrow')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
