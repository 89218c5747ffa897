"""Druid's native batch task JSON in, a frozen DruidIngestTask out, and back again; every key
understood, without effect (logged) or refused — all refusals in one error."""

from __future__ import annotations

import copy
import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from segmentlake.core.druid_filter import druid_filter_sql
from segmentlake.core.granularity import Granularity
from segmentlake.core.ingest_spec import (
    DimensionsSpec,
    ExpressionTransform,
    GranularitySpec,
    IngestionSpec,
    MetricSpec,
    TimestampSpec,
    TransformSpec,
)
from segmentlake.core.interval import Interval
from segmentlake.core.partitions_spec import (
    DimensionRangePartitionsSpec,
    DynamicPartitionsSpec,
    HashedPartitionsSpec,
    SingleDimensionPartitionsSpec,
)
from segmentlake.druid.ingest_task import DruidIngestTask, aligned_interval
from segmentlake.druid.input import InputFormat, LocalInputSource
from segmentlake.druid.tasks import read_druid_task
from segmentlake.errors import SpecError

TUTORIAL = Path(__file__).parents[1] / "data" / "druid_tutorial" / "specs"

# Druid's wikipedia tutorial as an index_parallel task with perfect rollup.
WIKIPEDIA: dict[str, Any] = {
    "type": "index_parallel",
    "spec": {
        "dataSchema": {
            "dataSource": "wikipedia",
            "timestampSpec": {"column": "time", "format": "iso"},
            "dimensionsSpec": {
                "dimensions": [
                    "channel",
                    "cityName",
                    "countryIsoCode",
                    "isRobot",
                    "namespace",
                    "page",
                    "user",
                    {"name": "metroCode", "type": "long"},
                ]
            },
            "metricsSpec": [
                {"type": "count", "name": "edits"},
                {"type": "longSum", "name": "added", "fieldName": "added"},
                {"type": "longSum", "name": "deleted", "fieldName": "deleted"},
                {"type": "HLLSketchBuild", "name": "users", "fieldName": "user", "lgK": 14},
            ],
            "granularitySpec": {
                "type": "uniform",
                "segmentGranularity": "day",
                "queryGranularity": "hour",
                "intervals": ["2015-09-12/2015-09-13"],
                "rollup": True,
            },
        },
        "ioConfig": {
            "type": "index_parallel",
            "inputSource": {
                "type": "local",
                "baseDir": "quickstart/tutorial/",
                "filter": "wikiticker-2015-09-12-sampled.json.gz",
            },
            "inputFormat": {"type": "json"},
            "appendToExisting": False,
        },
        "tuningConfig": {
            "type": "index_parallel",
            "partitionsSpec": {
                "type": "hashed",
                "numShards": 2,
                "partitionDimensions": ["channel", "page"],
            },
            "forceGuaranteedRollup": True,
            "maxRowsInMemory": 25000,
            "maxNumConcurrentSubTasks": 2,
            "splitHintSpec": {"type": "maxSize", "maxSplitSize": 1073741824},
            "maxParseExceptions": 10,
        },
    },
    "context": {"priority": 50},
}


def wikipedia(**changes: Any) -> dict[str, Any]:
    """A deep copy of WIKIPEDIA with ``section__key=value`` changes under ``spec``."""
    task = copy.deepcopy(WIKIPEDIA)
    for path, value in changes.items():
        *parents, key = path.split("__")
        obj = task["spec"]
        for parent in parents:
            obj = obj.setdefault(parent, {})
        obj[key] = value
    return task


def test_the_wikipedia_tutorial_task_reads_into_one_object() -> None:
    task = DruidIngestTask.from_dict(WIKIPEDIA)

    dims = ("channel", "cityName", "countryIsoCode", "isRobot", "namespace", "page", "user")
    assert task == DruidIngestTask(
        datasource="wikipedia",
        spec=IngestionSpec(
            timestamp_spec=TimestampSpec("time", "iso"),
            dimensions_spec=DimensionsSpec((*dims, "metroCode"), types=(("metroCode", "long"),)),
            metrics=(
                MetricSpec("count", "edits"),
                MetricSpec("longSum", "added", "added"),
                MetricSpec("longSum", "deleted", "deleted"),
                MetricSpec("HLLSketchBuild", "users", "user", lg_k=14),
            ),
            granularity_spec=GranularitySpec(Granularity.DAY, Granularity.HOUR, rollup=True),
            partitions_spec=HashedPartitionsSpec(
                num_shards=2, partition_dimensions=("channel", "page")
            ),
            max_parse_exceptions=10,
        ),
        input_source=LocalInputSource(
            "quickstart/tutorial/", "wikiticker-2015-09-12-sampled.json.gz"
        ),
        input_format=InputFormat("json"),
        intervals=(Interval.parse("2015-09-12/2015-09-13"),),
        priority=50,
    )
    assert task.interval == Interval.parse("2015-09-12/P1D")
    assert not task.append_to_existing
    assert not task.drop_existing
    assert DruidIngestTask.from_dict(task.to_dict()) == task
    assert DruidIngestTask.from_json(task.to_json()) == task


def test_keys_without_effect_are_logged_not_refused(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="segmentlake.druid.ingest_task_reader"):
        DruidIngestTask.from_dict(WIKIPEDIA)

    logged = "\n".join(r.getMessage() for r in caplog.records)
    for key in ("maxRowsInMemory", "maxNumConcurrentSubTasks", "splitHintSpec"):
        assert re.search(rf"spec\.tuningConfig\.{key} has no effect on Spark: \w", logged)


def test_the_older_top_level_form_reads_the_same() -> None:
    flat = {"type": "index_parallel", **WIKIPEDIA["spec"], "context": WIKIPEDIA["context"]}
    assert DruidIngestTask.from_dict(flat) == DruidIngestTask.from_dict(WIKIPEDIA)


def test_druid_0_12_parser_and_firehose_read_as_input_format_and_source() -> None:
    old = {
        "type": "index",
        "spec": {
            "dataSchema": {
                "dataSource": "updates-tutorial",
                "parser": {
                    "type": "string",
                    "parseSpec": {
                        "format": "csv",
                        "columns": ["timestamp", "animal", "number"],
                        "dimensionsSpec": {"dimensions": ["animal"]},
                        "timestampSpec": {"column": "timestamp", "format": "iso"},
                    },
                },
                "metricsSpec": [{"type": "longSum", "name": "number", "fieldName": "number"}],
                "granularitySpec": {
                    "segmentGranularity": "week",
                    "intervals": ["2018-01-01/2018-01-03"],
                },
            },
            "ioConfig": {
                "type": "index",
                "firehose": {"type": "local", "baseDir": "examples/", "filter": "*.csv"},
                "appendToExisting": True,
            },
            "tuningConfig": {
                "type": "index",
                "targetPartitionSize": 1000,
                "forceExtendableShardSpecs": True,
            },
        },
    }
    task = DruidIngestTask.from_dict(old)

    assert task.task_type == "index"
    assert task.input_format == InputFormat("csv", columns=("timestamp", "animal", "number"))
    assert task.input_source == LocalInputSource("examples/", "*.csv")
    assert task.spec.timestamp_spec == TimestampSpec("timestamp", "iso")
    assert task.spec.partitions_spec == DynamicPartitionsSpec(max_rows_per_segment=1000)
    # A WEEK task's intervals widen to whole weeks (2018-01-01 is a Monday), as Druid locks them.
    assert task.interval == Interval.parse("2018-01-01/P7D")
    assert DruidIngestTask.from_dict(task.to_dict()) == task


@pytest.mark.parametrize(
    ("tuning", "expected"),
    [
        ({"maxRowsPerSegment": 1000}, DynamicPartitionsSpec(1000)),
        ({"maxRowsPerSegment": 1000, "maxTotalRows": 5000}, DynamicPartitionsSpec(1000, 5000)),
        ({"forceGuaranteedRollup": True}, HashedPartitionsSpec()),
        (
            {"forceGuaranteedRollup": True, "numShards": 3, "partitionDimensions": ["channel"]},
            HashedPartitionsSpec(num_shards=3, partition_dimensions=("channel",)),
        ),
        (
            {"forceGuaranteedRollup": True, "maxRowsPerSegment": 700},
            HashedPartitionsSpec(target_rows_per_segment=700),
        ),
        # Druid ignores the deprecated keys when a partitionsSpec is given, and so do we.
        (
            {"partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 9}, "maxRowsPerSegment": 5},
            DynamicPartitionsSpec(9),
        ),
        (
            {
                "forceGuaranteedRollup": True,
                "partitionsSpec": {
                    "type": "range",
                    "partitionDimensions": ["channel"],
                    "targetRowsPerSegment": 10,
                },
            },
            DimensionRangePartitionsSpec(("channel",), 10),
        ),
        (
            {
                "forceGuaranteedRollup": True,
                "partitionsSpec": {
                    "type": "single_dim",
                    "partitionDimension": "page",
                    "maxRowsPerSegment": 30,
                },
            },
            SingleDimensionPartitionsSpec("page", max_rows_per_segment=30),
        ),
    ],
)
def test_partitioning_as_druid_reads_it(tuning: dict[str, Any], expected: Any) -> None:
    task = DruidIngestTask.from_dict(wikipedia(tuningConfig={"type": "index_parallel", **tuning}))
    assert task.spec.partitions_spec == expected
    assert DruidIngestTask.from_dict(task.to_dict()) == task


def test_report_parse_exceptions_means_none_allowed() -> None:
    tuning = {"reportParseExceptions": True, "maxParseExceptions": 100}
    assert DruidIngestTask.from_dict(wikipedia(tuningConfig=tuning)).spec.max_parse_exceptions == 0


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        (
            {"type": "csv", "findColumnsFromHeader": True},
            InputFormat("csv", find_columns_from_header=True),
        ),
        (
            {
                "type": "csv",
                "columns": ["time", "page"],
                "skipHeaderRows": 2,
                "listDelimiter": "\u0001",
            },
            InputFormat("csv", columns=("time", "page"), skip_header_rows=2),
        ),
        (
            {"type": "tsv", "hasHeaderRow": True},
            InputFormat("tsv", find_columns_from_header=True, delimiter="\t"),
        ),
        (
            {"type": "tsv", "columns": ["time"], "delimiter": "|"},
            InputFormat("tsv", columns=("time",), delimiter="|"),
        ),
        ({"type": "json", "keepNullColumns": True}, InputFormat("json", keep_null_columns=True)),
        (
            {"type": "json", "flattenSpec": {"useFieldDiscovery": True, "fields": []}},
            InputFormat("json"),
        ),
        (
            {"type": "parquet", "binaryAsString": True},
            InputFormat("parquet", binary_as_string=True),
        ),
    ],
)
def test_input_formats(fmt: dict[str, Any], expected: InputFormat) -> None:
    task = DruidIngestTask.from_dict(wikipedia(ioConfig__inputFormat=fmt))
    assert task.input_format == expected
    assert DruidIngestTask.from_dict(task.to_dict()) == task


def test_a_bad_task_lists_every_problem_in_one_error() -> None:
    task = wikipedia(
        ioConfig__inputSource={"type": "http", "uris": ["https://example.com/wiki.json"]},
        ioConfig__inputFormat={
            "type": "csv",
            "findColumnsFromHeader": True,
            "listDelimiter": "|",
            "flattenSpec": {"fields": [{"type": "path", "name": "x", "expr": "$.x"}]},
        },
        ioConfig__dropExisting="yes",
        ioConfig__appendToExisting=False,
        tuningConfig__maxRowsInMemory=1,  # no effect: not a problem
        tuningConfig__someFutureKnob=3,
    )
    schema = task["spec"]["dataSchema"]
    schema["dimensionsSpec"]["spatialDimensions"] = [{"dimName": "geo", "dims": ["lat", "lon"]}]
    schema["dimensionsSpec"]["dimensions"].append({"name": "tags", "multiValueHandling": "ARRAY"})
    schema["metricsSpec"].append({"type": "doubleMean", "name": "t", "fieldName": "x"})
    schema["transformSpec"] = {"filter": {"type": "javascript", "dimension": "page"}}
    schema["granularitySpec"]["intervals"] = ["2015-09-12/2015-09-13", "2015-09-20/2015-09-21"]
    schema["timestampSpec"]["missingValue"] = "the dawn of time"

    with pytest.raises(SpecError) as caught:
        DruidIngestTask.from_dict(task)

    message = str(caught.value)
    expected = [
        r"spec\.ioConfig\.inputSource\.type: input source \"http\" is not supported; accepted",
        r"spec\.ioConfig\.inputFormat\.listDelimiter: multi-value dimensions are not supported",
        r"spec\.ioConfig\.inputFormat\.flattenSpec: not supported; accepted here: ",
        r"spec\.ioConfig\.dropExisting: must be true or false",
        r"spec\.tuningConfig\.someFutureKnob: not supported; accepted here: .*maxParseExceptions",
        r"spec\.dataSchema\.dimensionsSpec\.spatialDimensions: spatial dimensions are not",
        r"spec\.dataSchema\.dimensionsSpec\.dimensions\[8\]\.multiValueHandling: multi-value",
        r"spec\.dataSchema\.metricsSpec\[4\]\.type: unknown aggregator type 'doubleMean'",
        r"spec\.dataSchema\.transformSpec\.filter\.type: filter type 'javascript' is not supported",
        r"spec\.dataSchema\.granularitySpec\.intervals: the intervals cover 2 separate runs",
        r"timestampSpec: timestampSpec\.missingValue: cannot parse timestamp 'the dawn of time'",
    ]
    for pattern in expected:
        assert re.search(pattern, message), f"{pattern!r} not in:\n{message}"
    assert message.startswith(
        f"this Druid task cannot run on segmentlake ({len(expected)} problems)"
    )
    assert "tuningConfig.maxRowsInMemory:" not in message


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"ioConfig__appendToExisting": True}, r"tuningConfig\.partitionsSpec: perfect rollup"),
        (
            {
                "ioConfig__appendToExisting": True,
                "ioConfig__dropExisting": True,
                "tuningConfig": {},
            },
            r"ioConfig\.dropExisting: applies to overwrites only",
        ),
        (
            {
                "dataSchema__granularitySpec": {"segmentGranularity": "day"},
                "ioConfig__dropExisting": True,
            },
            r"granularitySpec\.intervals: required with dropExisting: true",
        ),
        (
            {"dataSchema__granularitySpec__intervals": ["2015-09-13/2015-09-12"]},
            r"intervals\[0\]: .*before",
        ),
        ({"dataSchema__dataSource": ""}, r"dataSchema\.dataSource: must be a non-empty string"),
        (
            {"dataSchema__timestampSpec": {"column": "t", "format": "xxxx-ww"}},
            r"timestampSpec: .*'xxxx-ww'.*week-based year",
        ),
        (
            {"dataSchema__granularitySpec__type": "arbitrary"},
            r"granularitySpec\.type: \"arbitrary\"",
        ),
        ({"dataSchema__granularitySpec__segmentGranularity": "fortnight"}, r"unknown granularity"),
        (
            {
                "dataSchema__transformSpec": {
                    "transforms": [{"type": "expression", "name": "x", "expression": '"a" + 1'}]
                }
            },
            r"transforms\[0\]\.expression: .*double quotes",
        ),
        (
            {"ioConfig__inputFormat": {"type": "avro_ocf"}},
            r"inputFormat\.type: input format \"avro_ocf\"",
        ),
        (
            {"ioConfig__inputFormat": {"type": "csv"}},
            r"inputFormat: .*findColumnsFromHeader.*exactly one",
        ),
        (
            {"ioConfig__inputSource": {"type": "local", "filter": "*.json"}},
            r"inputSource: .*baseDir",
        ),
        (
            {"ioConfig__inputSource": {"type": "druid", "dataSource": "x"}},
            r"ioConfig\.inputSource\.interval: must be a non-empty string; it is missing",
        ),
        (
            {"ioConfig__inputSource": {"type": "http", "uris": ["http://x/y.json"]}},
            r"input source \"http\" is not supported; accepted: local, inline, druid, combining",
        ),
        (
            {
                "ioConfig__inputSource": {
                    "type": "combining",
                    "delegates": [{"type": "combining", "delegates": []}],
                }
            },
            r"delegates\[0\]\.type: input source \"combining\" is not supported here",
        ),
        (
            {
                "ioConfig__inputSource": {
                    "type": "druid",
                    "dataSource": "x",
                    "interval": "2024-01-01/P1D",
                    "filter": {"type": "javascript", "dimension": "a", "function": "f"},
                }
            },
            r"inputSource\.filter\.type",
        ),
        ({"ioConfig__inputFormat": None}, r"ioConfig\.inputFormat: is required"),
        ({"ioConfig__type": "index"}, r"ioConfig\.type: \"index\" does not match"),
        (
            {"dataSchema__metricsSpec": [{"type": "count", "name": "page"}]},
            r"spec: .*both as dimension and as metric",
        ),
        (
            {"tuningConfig__partitionsSpec": {"type": "hashed", "partitionDimensions": ["nope"]}},
            r"spec: partitionsSpec partition dimensions \['nope'\]",
        ),
        (
            {"dataSchema__dimensionsSpec__includeAllDimensions": True},
            r"includeAllDimensions: not supported",
        ),
        (
            {"dataSchema__dimensionsSpec__dimensions": [{"name": "j", "type": "json"}]},
            r"type \"json\"",
        ),
    ],
)
def test_each_refusal_names_its_path(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        DruidIngestTask.from_dict(wikipedia(**changes))


def test_not_a_task() -> None:
    with pytest.raises(SpecError, match=r"\(task\): must be a JSON object"):
        DruidIngestTask.from_dict([])
    with pytest.raises(SpecError, match=r"type: \"index_hadoop\" is not a native batch"):
        DruidIngestTask.from_dict({**WIKIPEDIA, "type": "index_hadoop"})
    with pytest.raises(SpecError, match=r"not valid JSON: .* line 1"):
        DruidIngestTask.from_json("{nope")


def test_intervals_widen_to_whole_chunks_and_merge() -> None:
    day = Granularity.DAY
    parts = [
        Interval.parse("2024-01-01T05:00/2024-01-01T07:00"),
        Interval.parse("2024-01-02/2024-01-02T01:00"),
    ]
    assert aligned_interval(parts, day) == Interval.parse("2024-01-01/2024-01-03")
    overlapping = [Interval.parse("2024-01-01/P3D"), Interval.parse("2024-01-02/P1D")]
    assert aligned_interval(overlapping, day) == Interval.parse("2024-01-01/P3D")
    with pytest.raises(SpecError, match="2 separate runs of DAY chunks"):
        aligned_interval([Interval.parse("2024-01-01/P1D"), Interval.parse("2024-01-03/P1D")], day)
    all_time = aligned_interval([Interval.parse("2024-01-01/P1D")], Granularity.ALL)
    assert (all_time.start.year, all_time.end.year) == (1, 9999)


def test_local_input_source_wildcards_match_file_names() -> None:
    source = LocalInputSource("data", "wiki*-2015-??-12.json.gz")
    assert source.matches("wikiticker-2015-09-12.json.gz")
    assert not source.matches("wikiticker-2015-09-12.json")
    assert not source.matches("Wikiticker-2015-09-12.json.gz")  # case-sensitive, as Druid
    assert LocalInputSource("data").filter == "*"
    assert LocalInputSource(files=["a.json"]).matches("anything")
    with pytest.raises(SpecError, match="needs"):
        LocalInputSource()


@pytest.mark.parametrize(
    ("druid", "sql"),
    [
        ({"type": "selector", "dimension": "page", "value": "A"}, "(CAST(`page` AS STRING) = 'A')"),
        ({"type": "selector", "dimension": "page", "value": None}, "(`page` IS NULL)"),
        ({"type": "selector", "dimension": "n", "value": 3}, "(CAST(`n` AS STRING) = '3')"),
        (
            {"type": "equals", "column": "n", "matchValueType": "LONG", "matchValue": 3},
            "(try_cast(`n` AS DOUBLE) = 3.0)",
        ),
        (
            {"type": "in", "dimension": "c", "values": ["a", "it's", None]},
            "(CAST(`c` AS STRING) IN ('a', 'it\\'s') OR `c` IS NULL)",
        ),
        ({"type": "null", "column": "c"}, "(`c` IS NULL)"),
        ({"type": "like", "dimension": "p", "pattern": "A%"}, "(CAST(`p` AS STRING) LIKE 'A%')"),
        (
            {
                "type": "bound",
                "dimension": "n",
                "lower": "10",
                "upper": "20",
                "upperStrict": True,
                "ordering": "numeric",
            },
            "(try_cast(`n` AS DOUBLE) >= 10.0 AND try_cast(`n` AS DOUBLE) < 20.0)",
        ),
        ({"type": "bound", "dimension": "p", "lower": "b"}, "(CAST(`p` AS STRING) >= 'b')"),
        (
            {
                "type": "range",
                "column": "n",
                "matchValueType": "DOUBLE",
                "lower": 1,
                "lowerOpen": True,
            },
            "(try_cast(`n` AS DOUBLE) > 1.0)",
        ),
        (
            {
                "type": "not",
                "field": {"type": "or", "fields": [{"type": "true"}, {"type": "false"}]},
            },
            "(NOT (TRUE OR FALSE))",
        ),
        (
            {"type": "selector", "dimension": "we`ird", "value": "x"},
            "(CAST(`we``ird` AS STRING) = 'x')",
        ),
        (
            {"type": "regex", "dimension": "p", "pattern": "^Wiki\\d"},
            "(CAST(`p` AS STRING) RLIKE '^Wiki\\\\d')",
        ),
        (
            {"type": "search", "dimension": "p", "query": {"type": "contains", "value": "Ab"}},
            "(contains(lower(CAST(`p` AS STRING)), 'ab'))",
        ),
        (
            {
                "type": "search",
                "dimension": "p",
                "query": {"type": "contains", "value": "Ab", "caseSensitive": True},
            },
            "(contains(CAST(`p` AS STRING), 'Ab'))",
        ),
        (
            {
                "type": "search",
                "dimension": "p",
                "query": {"type": "fragment", "values": ["a", "B"]},
            },
            "(contains(lower(CAST(`p` AS STRING)), 'a')"
            " AND contains(lower(CAST(`p` AS STRING)), 'b'))",
        ),
    ],
)
def test_druid_filters_translate_to_spark_sql(druid: dict[str, Any], sql: str) -> None:
    assert druid_filter_sql(druid, "f") == (sql, [])


def test_untranslatable_filters_list_every_part() -> None:
    druid = {
        "type": "and",
        "fields": [
            {"type": "selector", "dimension": "p", "value": "A", "extractionFn": {"type": "upper"}},
            {"type": "interval", "dimension": "__time", "intervals": ["2024-01-01/P1D"]},
            {"type": "bound", "dimension": "p", "ordering": "alphanumeric"},
            {"type": "in", "dimension": "p", "values": ["a"], "caseSensitive": False},
        ],
    }
    sql, problems = druid_filter_sql(druid, "filter")
    assert sql is None
    assert [p.split(":")[0] for p in problems] == [
        "filter.fields[0].extractionFn",
        "filter.fields[1].type",
        "filter.fields[2].ordering",
        "filter.fields[3].caseSensitive",
    ]


@pytest.mark.parametrize("path", sorted(TUTORIAL.rglob("*.json")), ids=lambda p: p.name)
def test_druid_tutorial_specs_read_or_say_why_not(path: Path) -> None:
    raw = json.loads(path.read_text())
    if "_derived" in raw:
        with pytest.raises(SpecError, match="cannot run on segmentlake"):
            DruidIngestTask.from_dict(raw)
        return
    task = read_druid_task(raw)  # ingestion tasks, and the compact and kill tutorials' tasks
    assert task.interval is not None
    assert read_druid_task(task.to_dict()) == task


# -- round trips ---------------------------------------------------------------------------

NAMES = st.sampled_from(["channel", "page", "user", "country", "city", "lang"])
GRANULARITIES = [Granularity.HOUR, Granularity.DAY, Granularity.WEEK, Granularity.MONTH]


@st.composite
def ingestion_specs(draw: st.DrawFn) -> IngestionSpec:
    """Valid, Druid-expressible ingestion specs."""
    dims = draw(st.none() | st.lists(NAMES, min_size=1, max_size=4, unique=True).map(tuple))
    metrics = [MetricSpec("count", "edits")] if draw(st.booleans()) else []
    metrics += [
        MetricSpec(kind, f"m_{i}", field)
        for i, (kind, field) in enumerate(
            draw(st.lists(st.tuples(st.sampled_from(["longSum", "doubleMax"]), NAMES), max_size=3))
        )
    ]
    if draw(st.booleans()):
        metrics.append(MetricSpec("HLLSketchBuild", "users", "user", draw(st.integers(4, 21))))
    segment = draw(st.sampled_from(GRANULARITIES))
    query = draw(
        st.sampled_from([g for g in Granularity if g.value[1] and g.value[1] <= 3_600_000])
    )
    partitions: Any = DynamicPartitionsSpec(draw(st.integers(1, 10**7)))
    if dims and draw(st.booleans()):
        partitions = draw(
            st.sampled_from(
                [
                    HashedPartitionsSpec(num_shards=3, partition_dimensions=dims[:1]),
                    HashedPartitionsSpec(),
                    DimensionRangePartitionsSpec(dims[:2], 1000),
                    SingleDimensionPartitionsSpec(dims[0], max_rows_per_segment=300),
                ]
            )
        )
    transforms = (ExpressionTransform("lang", "lower(`language`)"),) if draw(st.booleans()) else ()
    return IngestionSpec(
        timestamp_spec=TimestampSpec(
            draw(st.sampled_from(["ts", "time"])), draw(st.sampled_from(["auto", "iso", "millis"]))
        ),
        dimensions_spec=DimensionsSpec(
            dims,
            tuple(draw(st.lists(st.sampled_from(["x", "y"]), unique=True))),
            types=tuple(
                (d, draw(st.sampled_from(["string", "long", "double", "auto"])))
                for d in dims or ()
                if draw(st.booleans())  # some declare a type, some do not
            ),
            schema_discovery=draw(st.booleans()),
        ),
        metrics=tuple(metrics),
        granularity_spec=GranularitySpec(segment, query, draw(st.booleans())),
        transform_spec=TransformSpec(transforms, draw(st.none() | st.just("`page` IS NOT NULL"))),
        partitions_spec=partitions,
        max_parse_exceptions=draw(st.integers(0, 1000)),
    )


@st.composite
def druid_tasks(draw: st.DrawFn) -> DruidIngestTask:
    spec = draw(ingestion_specs())
    append = not spec.partitions_spec.perfect_rollup and draw(st.booleans())
    days = draw(st.lists(st.integers(0, 40), min_size=0 if append else 1, max_size=3))
    intervals = tuple(Interval.parse(f"2024-01-01/P{d + 1}D") for d in days)
    fmt = draw(
        st.sampled_from(
            [
                InputFormat("json", keep_null_columns=True),
                InputFormat("csv", columns=("ts", "page")),
                InputFormat(
                    "tsv", find_columns_from_header=True, skip_header_rows=1, delimiter=";"
                ),
                InputFormat("parquet"),
            ]
        )
    )
    source = draw(
        st.sampled_from(
            [LocalInputSource("in", "*.json"), LocalInputSource(files=("a.csv", "b.csv"))]
        )
    )
    return DruidIngestTask(
        datasource=draw(st.sampled_from(["wiki", "wiki-edits"])),
        spec=spec,
        input_source=source,
        input_format=fmt,
        intervals=intervals,
        append_to_existing=append,
        drop_existing=not append and draw(st.booleans()),
        task_type=draw(st.sampled_from(["index_parallel", "index"])),
        task_id=draw(st.none() | st.just("nightly-2024_01")),
        priority=draw(st.none() | st.integers(-10, 100)),
        lock_timeout_ms=draw(st.none() | st.integers(0, 10**6)),
    )


@settings(max_examples=150, deadline=None)
@given(ingestion_specs())
def test_ingestion_spec_round_trips_through_druid_json(spec: IngestionSpec) -> None:
    assert IngestionSpec.from_dict(spec.to_dict()) == spec
    assert IngestionSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec


@settings(max_examples=150, deadline=None)
@given(druid_tasks())
def test_druid_task_round_trips_through_json(task: DruidIngestTask) -> None:
    assert DruidIngestTask.from_dict(task.to_dict()) == task
    assert DruidIngestTask.from_json(task.to_json()) == task


def test_a_spec_without_any_dimension_has_no_druid_form() -> None:
    with pytest.raises(SpecError, match="no Druid JSON form"):
        IngestionSpec(dimensions_spec=DimensionsSpec(())).to_dict()


def test_tasks_are_frozen_and_hashable() -> None:
    task = DruidIngestTask.from_dict(WIKIPEDIA)
    assert hash(task) == hash(DruidIngestTask.from_dict(WIKIPEDIA))
    with pytest.raises(AttributeError):
        task.datasource = "other"  # type: ignore[misc]
