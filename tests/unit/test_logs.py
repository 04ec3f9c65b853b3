"""Log lines as Cloud Logging reads them: severity, message, trace, labels and metric fields."""

from __future__ import annotations

import json
import logging

import pytest

from gleaner import logs


def record(level: int, message: str, **extra: object) -> logging.LogRecord:
    made = logging.LogRecord("gleaner.test", level, __file__, 1, message, (), None)
    for key, value in extra.items():
        setattr(made, key, value)
    return made


@pytest.mark.parametrize(("headers", "expected"), [
    ({"X-Cloud-Trace-Context": "4bf92f3577b34da6a3ce929d0e0e4736/1;o=1"},
     ("4bf92f3577b34da6a3ce929d0e0e4736", "0000000000000001")),
    ({"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
     ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7")),
    ({"traceparent": "00-" + "0" * 32 + "-00f067aa0ba902b7-01"}, None),  # the all-zero id is invalid
    ({"X-Cloud-Trace-Context": "not-a-trace"}, None),
    ({}, None),
])
def test_the_trace_comes_from_either_header_and_junk_is_ignored(headers, expected):
    assert logs.trace_of(headers) == expected


def test_a_line_carries_severity_trace_labels_and_metric_fields():
    formatter = logs.CloudFormatter("proj-1")
    with logs.delivery("scrape", {"X-Cloud-Trace-Context": "4bf92f3577b34da6a3ce929d0e0e4736/7;o=1"},
                       run_id="r-1"):
        logs.label(site_domain="example.com")
        line = json.loads(formatter.format(record(logging.WARNING, "slow host",
                                                  fields={"event": logs.Event.SCRAPE_BATCH.value,
                                                          "pages_fetched": 3})))
    assert line["severity"] == "WARNING" and line["message"] == "slow host"
    assert line[logs.TRACE_FIELD] == "projects/proj-1/traces/4bf92f3577b34da6a3ce929d0e0e4736"
    assert line[logs.LABELS_FIELD] == {"stage": "scrape", "run_id": "r-1", "site_domain": "example.com"}
    assert (line["event"], line["pages_fetched"]) == ("scrape-batch", 3)
    # Outside a delivery a line has no labels and no trace.
    bare = json.loads(formatter.format(record(logging.INFO, "idle")))
    assert logs.LABELS_FIELD not in bare and logs.TRACE_FIELD not in bare and bare["severity"] == "INFO"


def test_a_multi_line_message_and_its_traceback_stay_one_json_line():
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        made = record(logging.ERROR, "first\nsecond", exc_info=sys.exc_info())
    text = logs.CloudFormatter().format(made)
    assert "\n" not in text
    assert "ValueError: boom" in json.loads(text)["message"]
