"""Which article URLs may be landed (the SSRF check) and PDF text extraction: pure functions."""

from __future__ import annotations

import pytest

from gleaner.errors import InvalidInput
from gleaner.extract.pdf import extract_pdf
from gleaner.references.identity import REFERENCES_NS, reference_item_id, source_document_id
from gleaner.references.url_policy import refusal_reason
from gleaner.settings.config import parse_networks
from tests.feed_site import PDF_LINES, make_pdf


def fake_resolver(answers):
    def resolve(host, port):
        return answers[host]
    return resolve


@pytest.mark.parametrize("url", [
    "http://127.0.0.1/", "http://localhost:8080/x", "http://169.254.169.254/latest/meta-data",
    "http://metadata.google.internal/", "http://10.1.2.3/", "http://[::1]/", "http://[::ffff:127.0.0.1]/",
    "http://100.64.0.1/", "http://2130706433/",
])
def test_non_public_addresses_are_refused(url):
    assert refusal_reason(url, (), fake_resolver({"2130706433": ["127.0.0.1"]})) is not None


def test_a_name_resolving_to_a_private_address_is_refused_and_a_public_one_passes():
    resolver = fake_resolver({"intranet.test": ["192.168.1.5"], "news.test": ["93.184.215.14"],
                              "split.test": ["93.184.215.14", "10.0.0.1"]})
    reason = refusal_reason("https://intranet.test/", (), resolver)
    assert reason is not None and reason.startswith("non-public address: intranet.test resolves to 192.168.1.5")
    assert refusal_reason("https://news.test/a", (), resolver) is None
    assert refusal_reason("https://split.test/a", (), resolver) is not None  # every address must pass


def test_allowed_networks_open_exactly_those_networks():
    allow = parse_networks("127.0.0.0/8")
    assert refusal_reason("http://127.0.0.1:9/x", allow) is None
    assert refusal_reason("http://169.254.169.254/", allow) is not None


def test_a_name_that_does_not_resolve_is_not_a_refusal():
    def broken(host, port):
        raise OSError("temporary failure in name resolution")
    assert refusal_reason("https://news.test/", (), broken) is None


def test_non_http_urls_are_refused():
    assert "only http(s)" in refusal_reason("file:///etc/passwd", ())


def test_reference_ids_are_uuid5_of_the_normalised_url_in_the_references_namespace():
    import uuid

    url = "https://news.test/a"
    assert reference_item_id(url) == str(uuid.uuid5(REFERENCES_NS, "ri:" + url))
    assert source_document_id(url) == str(uuid.uuid5(REFERENCES_NS, "sd:" + url))
    assert reference_item_id(url) != source_document_id(url)


def test_pdf_text_is_extracted_page_by_page():
    text = extract_pdf(make_pdf("Report", PDF_LINES))
    assert text.title == "Report"
    assert all(line in text.markdown for line in PDF_LINES)
    assert text.extraction_method.startswith("pypdf-")


@pytest.mark.parametrize("data", [b"<html>not a pdf</html>", b"%PDF-1.7\n%%EOF", b"%PDF-" + b"\x00" * 100])
def test_broken_pdfs_are_refused_cleanly(data):
    with pytest.raises(InvalidInput):
        extract_pdf(data)
