import hashlib
import pickle

from gleaner.extract.html import extract_html, whole_page_markdown
from gleaner.extract.page import extract_page
from gleaner.provenance.canonical import canonical_text, canonicalise, slice_text, spans_of, text_hash
from gleaner.provenance.handover import CanonicalHandover

ARTICLE = (
    "<html><head><title>Café</title></head><body><nav><a href=/>Home nav</a></nav><article><h1>Crème brûlée</h1>"
    + "<p>" + "A long enough paragraph about the dessert, déjà vu. " * 12 + "</p>"
    "<ul><li>sugar</li><li>cream</li></ul></article></body></html>"
)


def test_a_page_processed_in_the_worker_matches_extraction_of_its_decoded_text():
    body = ARTICLE.encode("latin-1")
    page = extract_page(body, "iso-8859-1", "https://a.test/x")
    expected = extract_html(ARTICLE, "https://a.test/x")
    assert page.content == expected.content_md.encode("utf-8")
    assert page.raw == expected.raw_md.encode("utf-8")
    assert page.title == "Café"
    assert page.content_hash == hashlib.sha1(page.content).hexdigest()
    assert page.raw_hash == hashlib.sha1(page.raw).hexdigest()


def test_the_workers_canonical_text_is_what_ingest_computes_from_the_stored_bytes():
    page = extract_page(ARTICLE.encode("utf-8"), None, "https://a.test/x")
    assert page.canonical == canonicalise(page.content)
    text = canonical_text(page.content.decode("utf-8"))
    assert page.canonical.text == text.encode("utf-8")
    assert page.canonical.text_hash == text_hash(text)
    assert page.canonical.spans() == spans_of(text)
    for span in page.canonical.spans():
        assert slice_text(text, span.start, span.end).strip()


def test_a_page_without_main_content_hands_on_the_whole_page_once():
    page = extract_page(b"<html><body><nav><a href=/>Only a menu</a></nav></body></html>", None, "https://a.test/")
    assert page.content == page.raw and b"Only a menu" in page.content
    # One object for both bodies and the canonical text: the pool's pipe carries the bytes once.
    assert len(pickle.dumps(page)) < 2 * len(page.content) + 600


def test_canonicalising_changes_nothing_when_the_body_is_already_canonical_and_nfc_when_not():
    assert canonicalise(b"# T\n\ntext\n").text == b"# T\n\ntext\n"
    decomposed = "Cafe\u0301\r\n".encode()
    assert canonicalise(decomposed).text == "Café\n".encode()


def test_the_whole_page_renderer_collapses_only_runs_of_spaces_and_keeps_code_as_it_is():
    from lxml import html as lxml_html

    tree = lxml_html.fromstring(
        "<html><body><p> a\u00a0\u00a0b\t c  d </p><pre>  x  =  1\n</pre>"
        "<table><tr><td></td><td>a|b</td></tr></table></body></html>"
    )
    assert whole_page_markdown(tree) == "a b c d\n\n```\n  x  =  1\n```\n\n|  | a\\|b |\n| --- | --- |\n"


def test_the_handover_gives_each_text_once_and_drops_the_oldest_beyond_its_size():
    texts = {h: canonicalise(f"# {h}\n\n".encode() + b"x" * 100) for h in "abc"}
    handover = CanonicalHandover(max_bytes=300)
    for h, text in texts.items():
        handover.put(h, text)
    assert handover.take("a") is None  # evicted: over 300 bytes with all three
    assert handover.take("c") == texts["c"]
    assert handover.take("c") is None
    assert CanonicalHandover(max_bytes=0).take("b") is None


def test_the_whole_page_renderer_reads_an_elements_text_as_lxml_text_content_does():
    """raw.md's bytes (and so its hash) must not move when the renderer reads text another way."""
    from lxml import html as lxml_html

    from gleaner.extract.html import _text_content

    tree = lxml_html.fromstring(
        "<html><body><ul><li>a <b>bold</b><!-- hidden --> tail<?pi x?> &amp; &#160;&lt;x&gt; <script>var s</script>"
        "<i>end</i></li><li></li></ul><h2>T\u00e9 <code>c</code></h2></body></html>"
    )
    for element in tree.iter():
        if isinstance(element.tag, str):
            assert _text_content(element) == element.text_content()
    assert whole_page_markdown(tree) == "- a bold tail & <x> var send\n\n## T\u00e9 c\n"


XHTML = (
    '<?xml version="1.0" encoding="utf-8" ?>\n'
    '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN"'
    ' "http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">\n'
    '<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="en" lang="en">\n<head>\n'
    '<meta http-equiv="Content-Type" content="text/html; charset=utf-8" />\n'
    "<title>Docutils Configuration</title>\n</head>\n<body>\n<div class=\"document\">\n"
    "<h1 class=\"title\">Docutils Configuration</h1>\n"
    + "<p>" + "Configuration files are used for persistent customization of every front end. " * 6 + "</p>\n"
    "<p>A second paragraph, so both the first and the last of the page are kept.</p>\n"
    "</div>\n</body>\n</html>\n"
)


def test_an_xhtml_page_with_an_xml_declaration_is_read_as_a_whole_document():
    # docutils, DocBook and many older generators begin every page with one; lxml refuses a str that
    # declares an encoding, so every such page was kept as empty and the decider excluded a whole site.
    for prolog in ('<?xml version="1.0" encoding="utf-8" ?>', "<?xml version='1.0'?>",
                   '\ufeff<?xml version="1.0" encoding="UTF-8"?>'):
        page = XHTML.replace('<?xml version="1.0" encoding="utf-8" ?>', prolog)
        extracted = extract_html(page, "https://docs.test/config.html")
        assert extracted.title == "Docutils Configuration", prolog
        assert "persistent customization" in extracted.content_md and "second paragraph" in extracted.content_md
        assert extracted.main_text_chars > 400
        assert "Docutils Configuration" in extracted.raw_md
    worker = extract_page(XHTML.encode("utf-8"), "utf-8", "https://docs.test/config.html")
    assert b"persistent customization" in worker.content and worker.title == "Docutils Configuration"
