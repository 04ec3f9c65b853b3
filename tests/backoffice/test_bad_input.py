"""Bad input is a 400 on every route of `gleaner serve`, never a 500: the cases a fuzzer found (issue 26).

Each case is a request a careless or hostile caller can send; the server must answer 400 (or 404 for
an id that names nothing) and go on answering. NUL and lone surrogates are refused where the query,
the form and the JSON body are parsed, so none reaches SQL.
"""

from __future__ import annotations

import json
import random

import httpx

from tests.backoffice.conftest import SITE, Kept

HUGE = "99999999999999999999"


def bad_requests(kept: Kept) -> list[tuple[str, str, bytes | None, str | None]]:
    """(method, path and query, body, content type): the 28 cases of issue 26 and their neighbours."""
    run = kept.first["run_id"]
    doc = kept.document_id("/docs/install")
    gets = [
        f"/v1/runs?offset={HUGE}",
        f"/v1/sites/{SITE}/tree?offset={HUGE}",
        f"/v1/sites/{SITE}/documents?offset={HUGE}",
        f"/v1/runs/{run}/urls?offset={HUGE}",
        f"/v1/quality?offset={HUGE}",
        f"/ui/sites/{SITE}/documents?offset={HUGE}",
        f"/v1/documents/{doc}/versions/%B2",
        f"/v1/documents/{doc}/versions/%C2%B2",
        f"/ui/documents/{doc}/versions/%C2%B2",
        f"/v1/documents/{doc}/diff?from=%C2%B2",
        f"/v1/sites/{SITE}/tree?prefix=/%00",
        f"/v1/sites/{SITE}/documents?prefix=/%00",
        f"/v1/sites/{SITE}/documents?tag=%00",
        f"/ui/sites/{SITE}?prefix=/%00",
        f"/v1/sites/{SITE}/tree?prefix=/%ED%A0%80",
        "/v1/changes?since=0001-01-01T00:00:00%2B14:00",
        "/v1/changes?since=9999-12-31T23:59:59-14:00",
        "/v1/quality?since=0001-01-01T00:00:00%2B01:00",
        "/v1/changes?site=%00",
        "/v1/runs?limit=%C2%B2",
        "/refs?q=x&limit=%C2%B2",
        "/refs?q=x&limit=%B2",
    ]
    cases: list[tuple[str, str, bytes | None, str | None]] = [("GET", g, None, None) for g in gets]
    as_json = "application/json"
    for body in ('{"glob": "/a\\ud800", "action": "skip"}', '{"glob": "/a\\u0000", "action": "skip"}',
                 '{"glob": "/a", "action": "skip", "reason": "\\u0000"}'):
        cases.append(("POST", f"/v1/sites/{SITE}/rules", body.encode(), as_json))
    for body in ('{"url": "http://x.test/\\udfff", "decision": "include"}',
                 '{"url": "http://x.test/\\u0000", "decision": "exclude"}'):
        cases.append(("POST", f"/v1/sites/{SITE}/review", body.encode(), as_json))
    form = "application/x-www-form-urlencoded"
    cases.append(("POST", f"/ui/sites/{SITE}/rules", b"glob=/%00&action=skip", form))
    cases.append(("POST", f"/ui/sites/{SITE}/rules", b"glob=/%ED%A0%80&action=skip", form))
    cases.append(("POST", f"/ui/sites/{SITE}/review", b"url=http://x.test/%00&decision=include", form))
    return cases


def send(client: httpx.Client, kept: Kept, method: str, path: str, body: bytes | None, kind: str | None
         ) -> httpx.Response:
    headers = {"Origin": kept.url, "Authorization": "Bearer admin-secret"} if path.startswith("/refs") \
        else {"Origin": kept.url}
    if kind:
        headers["Content-Type"] = kind
    # A raw target: httpx would otherwise re-encode what the case spells on purpose.
    request = client.build_request(method, kept.url + path, content=body, headers=headers)
    request.url = request.url.copy_with(raw_path=path.encode("ascii"))
    return client.send(request)


def test_each_bad_input_the_fuzzer_found_is_a_400_and_leaves_nothing_behind(kept: Kept):
    rules_before = kept.get(f"/v1/sites/{SITE}/rules").json()["rules"]
    cases = bad_requests(kept)
    assert len(cases) >= 28
    with httpx.Client(timeout=20) as client:
        answers = {(method, path, body): send(client, kept, method, path, body, kind).status_code
                   for method, path, body, kind in cases}
    assert {case: status for case, status in answers.items() if status != 400} == {}
    assert kept.get(f"/v1/sites/{SITE}/rules").json()["rules"] == rules_before
    assert kept.get("/v1/runs").status_code == 200  # the server goes on


def test_fuzzed_query_values_on_every_route_are_never_a_500(kept: Kept):
    run = kept.first["run_id"]
    doc = kept.document_id("/docs/install")
    routes = ["/v1/runs", f"/v1/runs/{run}/urls", f"/v1/sites/{SITE}/tree", f"/v1/sites/{SITE}/documents",
              "/v1/changes", "/v1/quality", "/v1/notify/deliveries", f"/v1/documents/{doc}/diff",
              f"/v1/sites/{SITE}/conflicts", f"/ui/runs/{run}", f"/ui/sites/{SITE}", f"/ui/documents/{doc}",
              "/ui/quality", f"/ui/sites/{SITE}/documents", "/refs"]
    names = ["limit", "offset", "prefix", "since", "site", "status", "tag", "from", "to", "kind", "q",
             "subscription", "policy", "origin", "raw"]
    values = ["%00", "%ED%A0%80", "%B2", "%C2%B2", HUGE, "-" + HUGE, "1e9", "0001-01-01", "99999-01-01",
              "9999-12-31T23:59:59-14:00", "/%00", "%FF%FE", "%E2%80%AE", "' OR 1=1 --", "%5C", "%25"]
    rng = random.Random(2626)
    statuses: dict[int, int] = {}
    with httpx.Client(timeout=20) as client:
        for _ in range(250):
            route = rng.choice(routes)
            query = "&".join(f"{rng.choice(names)}={rng.choice(values)}" for _ in range(rng.randint(1, 3)))
            answer = send(client, kept, "GET", f"{route}?q=x&{query}" if route == "/refs" else f"{route}?{query}",
                          None, None)
            statuses[answer.status_code] = statuses.get(answer.status_code, 0) + 1
            assert answer.status_code < 500, (route, query, answer.text[:200])
    assert statuses.get(400, 0) > 50, statuses


def test_a_json_command_with_nul_anywhere_is_refused_before_it_is_read(kept: Kept):
    answer = httpx.post(f"{kept.url}/v1/sites/{SITE}/rules", headers={"Content-Type": "application/json"},
                        content=json.dumps({"glob": "/ok", "action": "skip", "x": ["\x00"]}))
    assert answer.status_code == 400
    assert "NUL" in answer.json()["error"]
