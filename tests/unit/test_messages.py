import dataclasses
import json

import pytest

from gleaner.errors import InvalidInput
from gleaner.messages import (
    CrawlMapped,
    CrawlRequested,
    FetchedPage,
    PagesFetched,
    ScrapeBatch,
    SnapshotsWritten,
    decode,
    encode,
    run_id_for,
)

EXAMPLES = [
    CrawlRequested(request_id="r1", target_url="https://example.com/", include=("/docs/*",), limit=5),
    CrawlMapped(run_id="11111111-1111-1111-1111-111111111111", site_domain="example.com"),
    ScrapeBatch(run_id="11111111-1111-1111-1111-111111111111", site_domain="example.com", batch_no=3,
                document_ids=("a", "b")),
    PagesFetched(run_id="r", site_domain="s", batch_no=0, pages=(
        FetchedPage("d", "h", "rh", "k", None, 200, 12, 345, "trafilatura"),)),
    SnapshotsWritten(run_id=None, site_domain="s", snapshot_ids=("x",)),
]


@pytest.mark.parametrize("message", EXAMPLES, ids=lambda m: type(m).__name__)
def test_every_message_survives_the_wire(message):
    assert decode(encode(message)) == message


@pytest.mark.parametrize("message", EXAMPLES, ids=lambda m: type(m).__name__)
def test_every_message_s_wire_data_is_every_field_as_dataclasses_would_give_it(message):
    # Other deployed versions decode what this one sends: the data is exactly the fields, nested ones too.
    assert json.loads(encode(message))["data"] == json.loads(json.dumps(dataclasses.asdict(message)))


def test_a_redelivered_request_maps_to_the_same_run():
    assert run_id_for("abc") == run_id_for("abc") != run_id_for("abd")
    assert EXAMPLES[0].run_id == run_id_for("r1")


def test_task_names_are_deterministic():
    assert EXAMPLES[2].task_name == "11111111-1111-1111-1111-111111111111-3"


@pytest.mark.parametrize(
    "raw",
    [b"not json", b"[]", b'{"type":"CrawlMapped","v":1}', b'{"type":"Nope","v":1,"data":{}}',
     b'{"type":"CrawlMapped","v":99,"data":{"run_id":"r","site_domain":"s"}}',
     b'{"type":"CrawlMapped","v":1,"data":{"run_id":"r"}}',
     b'{"type":"PagesFetched","v":1,"data":{"run_id":"r","site_domain":"s","batch_no":0,"pages":[{"x":1}]}}'],
)
def test_malformed_messages_are_permanent_errors(raw):
    with pytest.raises(InvalidInput):
        decode(raw)


def test_decoding_can_insist_on_a_type():
    with pytest.raises(InvalidInput):
        decode(encode(EXAMPLES[1]), expect=ScrapeBatch)
    assert json.loads(encode(EXAMPLES[1]))["type"] == "CrawlMapped"
