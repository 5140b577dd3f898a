"""The OpenAPI document tells the truth about errors: every error response of every route is the
one `Problem` schema under `application/problem+json` (422 included), each route declares the
errors it can answer, and the errors the app really answers are among those declared. `/docs`
works offline: its page refers only to assets the app serves itself."""

from __future__ import annotations

import re

import httpx

from tests.backend.api.serving import start_chat

PROBLEM_REF = {"schema": {"$ref": "#/components/schemas/Problem"}}
DECLARED = {
    ("/v1/conversations", "post"): {413, 429, 500, 503},
    ("/v1/conversations/{conversation_id}/messages", "post"): {401, 403, 404, 409, 413, 422, 429, 500, 503},
    ("/v1/conversations/{conversation_id}/messages/stream", "post"): {401, 403, 404, 409, 413, 422, 429, 500, 503},
    ("/v1/conversations/{conversation_id}", "get"): {401, 403, 404, 422, 500, 503},
    ("/readyz", "get"): {500, 503},
    ("/healthz", "get"): {500},
    # ops (Bearer MUARL_OPS_TOKEN): registry, cycles, escalation queue
    ("/v1/ops/cycles", "get"): {401, 403, 422, 500, 503},
    ("/v1/ops/cycles", "post"): {401, 403, 409, 422, 500, 503},
    ("/v1/ops/escalations", "get"): {401, 403, 422, 500, 503},
    ("/v1/ops/escalations/{escalation_id}", "get"): {401, 403, 404, 422, 500, 503},
    ("/v1/ops/escalations/{escalation_id}/resolve", "post"): {401, 403, 404, 409, 422, 500, 503},
    ("/v1/ops/escalations/{escalation_id}/dismiss", "post"): {401, 403, 404, 409, 422, 500, 503},
    ("/v1/ops/models", "get"): {401, 403, 422, 500, 503},
    ("/v1/ops/models/{version_id}", "get"): {401, 403, 404, 422, 500, 503},
    ("/v1/ops/models/{version_id}/promote", "post"): {401, 403, 404, 409, 422, 500, 503},
    ("/v1/ops/rollback", "post"): {401, 403, 409, 422, 500, 503},
    ("/v1/ops/events", "get"): {401, 403, 422, 500, 503},
}


def _errors(op: dict) -> dict[int, dict]:
    return {int(code): r for code, r in op["responses"].items() if int(code) >= 400}


async def test_every_error_is_the_problem_schema(client: httpx.AsyncClient) -> None:
    doc = (await client.get("/openapi.json")).json()
    problem = doc["components"]["schemas"]["Problem"]
    assert set(problem["required"]) >= {"title", "status", "detail"}
    assert "HTTPValidationError" not in doc["components"]["schemas"]
    seen = set()
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            errors = _errors(op)
            assert set(errors) == DECLARED[(path, method)], (path, method, sorted(errors))
            for code, response in errors.items():
                assert response["content"] == {"application/problem+json": PROBLEM_REF}, (path, method, code)
                if code in (409, 429, 503):
                    assert "Retry-After" in response["headers"]
            seen.add((path, method))
    assert seen == set(DECLARED)


async def test_real_errors_are_among_the_declared_ones(client: httpx.AsyncClient) -> None:
    chat = await start_chat(client)
    declared = DECLARED[("/v1/conversations/{conversation_id}/messages", "post")]
    url = f"/v1/conversations/{chat.id}/messages"
    answers = [
        await client.post(url, json={"content": "hi"}),  # 401
        await client.post(url, json={"content": "hi"}, headers={"Authorization": "Bearer wrong"}),  # 403
        await client.post("/v1/conversations/%00/messages", json={"content": "hi"}, headers=chat.auth),  # 404
        await client.post(url, json={"content": ""}, headers=chat.auth),  # 422
        await client.post(url, json={"content": "x" * 5000}, headers=chat.auth),  # 413
    ]
    assert [r.status_code for r in answers] == [401, 403, 404, 422, 413]
    for r in answers:
        assert r.status_code in declared and r.headers["content-type"] == "application/problem+json"
        assert {"title", "status", "detail"} <= set(r.json())


async def test_docs_work_offline(client: httpx.AsyncClient) -> None:
    page = await client.get("/docs")
    assert page.status_code == 200
    assert not re.search(r"https?://", page.text), "the docs page refers to another host"
    assets = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert any(a.endswith("swagger-ui-bundle.js") for a in assets)
    assert any(a.endswith("swagger-ui.css") for a in assets)
    for asset in assets:
        r = await client.get(asset)
        assert r.status_code == 200 and len(r.content) > 100, asset
    bundle = await client.get(next(a for a in assets if a.endswith(".js")))
    assert "SwaggerUIBundle" in bundle.text
    assert "/openapi.json" in page.text
