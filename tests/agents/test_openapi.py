"""`GET /v1/openapi.json` describes the route table the API serves: every route is in it, and every
route in it answers on a running `gleaner serve`."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import httpx

from gleaner.backoffice import api
from gleaner.backoffice.openapi import OTHER_ROUTES, document, openapi_path

from .conftest import OPERATOR_SECRET, SITE, Served

ROUTING_MISSES = ("no such endpoint", "no route")  # what a path no route serves answers, unlike a missing id


def test_every_route_of_the_table_is_in_the_document_with_its_methods():
    described = document()
    assert described["openapi"].startswith("3.1")
    ids = [op["operationId"] for ops in described["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))
    expected = {(openapi_path(path), method.lower()) for path, methods in api._API.items() for method in methods}
    expected |= {(path, method.lower()) for path, methods in OTHER_ROUTES.items() for method in methods}
    present = {(path, method) for path, ops in described["paths"].items() for method in ops}
    assert present == expected
    for path, ops in described["paths"].items():
        for op in ops.values():
            named = {p["name"] for p in op.get("parameters", []) if p["in"] == "path"}
            assert named == set(re.findall(r"\{([a-z_]+)\}", path)), path
    tree = described["paths"]["/v1/sites/{site}/documents"]["get"]
    assert {"status", "limit", "offset"} <= {p["name"] for p in tree["parameters"] if p["in"] == "query"}


def _fill(path: str, served: Served) -> str:
    document_id = served.document_id("/docs/install")
    real = {"site": SITE, "run": served.run["run_id"], "document": document_id, "version": "1",
            "text_hash": served.current_text("/docs/install").text_hash}
    if path.endswith(("/rescrape", "/replay")):  # a real id would start a run in the session's shared copy
        real.pop("document")
        real.pop("run")
    return re.sub(r"\{([a-z_]+)\}", lambda m: real.get(m.group(1), str(uuid.uuid4())), path)


def test_the_server_serves_the_document_and_every_documented_route_answers(served):
    served_doc = httpx.get(served.url + "/v1/openapi.json", timeout=10)
    assert served_doc.status_code == 200 and served_doc.json() == document()
    answers: dict[tuple[str, str], tuple[int, Any]] = {}
    for path, ops in served_doc.json()["paths"].items():
        for method in ops:
            # /v1/texts/ is the webhook's and takes its bearer; the back office on loopback takes none.
            headers = {"Authorization": f"Bearer {OPERATOR_SECRET}"} if path.startswith("/v1/texts/") else {}
            query = {"q": "install"} if any(p["name"] == "q" for p in ops[method].get("parameters", [])) else {}
            response = httpx.request(method.upper(), served.url + _fill(path, served), headers=headers, params=query,
                                     json={} if method in ("post", "put", "patch") else None, timeout=30)
            streamed = response.headers["content-type"] == "application/x-ndjson"
            body = [json.loads(line) for line in response.text.splitlines()] if streamed else response.json()
            answers[(method, path)] = (response.status_code, body)
            if streamed:  # the export: one record per line, as the document says
                assert "application/x-ndjson" in ops[method]["responses"]["200"]["content"], path
                assert body and all(isinstance(r, dict) for r in body), path
    for (method, path), (status, body) in answers.items():
        assert status != 405, (method, path, body)
        assert not (status == 404 and str(body.get("error", "")).startswith(ROUTING_MISSES)), (method, path, body)
        all_real = all(f"{{{name}}}" not in path for name in ("delivery", "rule", "conflict", "composite", "job"))
        if method == "get" and all_real:
            assert status == 200, (method, path, body)
