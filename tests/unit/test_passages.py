"""Back-office search: passages read as text, one block per page, and an honest "no good match"."""

from __future__ import annotations

from gleaner.backoffice import pages
from gleaner.backoffice.passages import as_text, grouped

HIT = {"document_id": "d1", "url": "http://demo.test/docs/install", "title": "Install", "site_domain": "demo.test",
       "version": 2, "score": 0.8}


def test_a_passage_reads_as_text_without_markdown_marks():
    shown = as_text("# Install\n\nRun **pip install** and see [the docs](http://x/docs).\n\n- one\n- two")
    assert shown == "Install · Run pip install and see the docs. · one · two"


def test_passages_of_one_page_are_grouped_under_it_best_page_first():
    answer = {"results": [{**HIT, "preview": "## Step one"}, {**HIT, "document_id": "d2", "url": "u2", "title": "B",
                                                              "score": 0.5, "preview": "other"},
                          {**HIT, "score": 0.4, "preview": "Step *two*"}]}
    found = grouped(answer)
    assert [(p.title, p.passages) for p in found] == [("Install", ["Step one", "Step two"]), ("B", ["other"])]


def test_an_empty_answer_with_a_note_says_no_good_match_and_the_note():
    for answer, said in (({"results": [], "note": "nothing scored above the relevance floor"},
                          "No good match for “zzqx”: nothing scored above the relevance floor"),
                         ({"results": []}, "No good match for “zzqx”.")):
        body = pages.render("search.html", q="zzqx", site="", answer=answer, error=None, hits=grouped(answer)).body
        assert said in body and "#" not in body.split("<main")[-1].split("</form>")[-1]
