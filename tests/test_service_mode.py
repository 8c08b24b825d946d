"""The mode of the indexes the service creates and opens (`chosen_mode`, as every other entry point): a
write of texts creates a verified index unless serve has --plain, one of precomputed fingerprints a plain
one; an existing index keeps its mode, and is refused when serve asks for the other. The app is called
in-process (httpx's ASGI transport) on the suite's real server; serve's own options in a real process."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from simhash_redis import SimhashIndex, open_index
from simhash_redis.errors import IndexNotFound
from simhash_redis.service.app import create_app
from simhash_redis.service.config import ServiceConfig
from tests.servers import ServerProcess
from tests.service_process import ServiceProcess

pytest.importorskip("starlette")

TEXT = "The city council voted on Tuesday to expand the bicycle lane network across the northern districts."
LINES = {"content-type": "application/x-ndjson"}


def served(
    server: ServerProcess, requests: list[tuple[str, dict[str, Any]]], **config: Any
) -> list[httpx.Response]:
    """The answers of an in-process service (configured as given) to POSTs of (path, httpx arguments)."""
    app = create_app(ServiceConfig(redis_url=server.url, access_log=False, **config))

    async def run() -> list[httpx.Response]:
        async with app.app.router.lifespan_context(app.app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://service") as client:
                return [await client.post(path, **kwargs) for path, kwargs in requests]

    return asyncio.run(run())


def verified(server: ServerProcess, name: str) -> bool:
    return SimhashIndex(server.client(), name, create=False).config.verification is not None


def test_a_write_creates_a_verified_index_from_texts_and_a_plain_one_from_fingerprints(
    redis_server: ServerProcess,
) -> None:
    fingerprints = [{"id": "a", "fingerprint": "0x1"}, {"id": "b", "fingerprint": "0xff"}]
    texts = [{"id": "a", "text": TEXT}, {"id": "b", "text": TEXT + " again"}]
    lines = {
        kind: "".join(json.dumps(doc) + "\n" for doc in docs)
        for kind, docs in (("fingerprints", fingerprints), ("texts", texts))
    }
    answers = served(
        redis_server,
        [
            ("/v1/indexes/m-text/add", {"json": texts[0]}),
            ("/v1/indexes/m-fp/add", {"json": fingerprints[0]}),
            ("/v1/indexes/m-text-array/add_if_new/batch", {"json": texts}),
            ("/v1/indexes/m-fp-array/add/batch", {"json": fingerprints}),
            ("/v1/indexes/m-text-lines/add/batch", {"content": lines["texts"], "headers": LINES}),
            ("/v1/indexes/m-fp-lines/add_if_new/batch", {"content": lines["fingerprints"], "headers": LINES}),
        ],
    )
    assert [a.status_code for a in answers] == [200] * 6, [a.text for a in answers]
    assert all("error" not in line for a in answers for line in a.text.splitlines())
    for name, mode in (
        ("m-text", True),
        ("m-fp", False),
        ("m-text-array", True),
        ("m-fp-array", False),
        ("m-text-lines", True),
        ("m-fp-lines", False),
    ):
        assert verified(redis_server, name) is mode, name


def test_plain_and_verified_choose_the_mode_of_a_new_index(redis_server: ServerProcess) -> None:
    [added] = served(
        redis_server, [("/v1/indexes/m-asked-plain/add", {"json": {"id": "a", "text": TEXT}})], verified=False
    )
    assert added.status_code == 200 and not verified(redis_server, "m-asked-plain")
    # Asked for verified, a write of fingerprints is refused: the verified index it would create needs
    # texts, and a refused write creates nothing.
    [refused] = served(
        redis_server,
        [("/v1/indexes/m-asked-v/add", {"json": {"id": "a", "fingerprint": "0x1"}})],
        verified=True,
    )
    assert refused.status_code == 400 and "needs its text" in refused.json()["error"]["message"]
    with pytest.raises(IndexNotFound):
        verified(redis_server, "m-asked-v")


def test_an_existing_index_keeps_its_mode_and_the_other_one_asked_for_is_refused(
    redis_server: ServerProcess,
) -> None:
    SimhashIndex(redis_server.client(), "m-plain").add("a", TEXT)
    open_index("m-verified", redis_server.url, verified=True).add("a", TEXT)
    near = {"json": {"text": TEXT}}
    found = served(redis_server, [("/v1/indexes/m-plain/near", near), ("/v1/indexes/m-verified/near", near)])
    assert [a.json()["matches"][0].get("jaccard") for a in found] == [None, 1.0]
    for config, name, named in (
        ({"verified": False}, "m-verified", "--plain"),
        ({"verified": True}, "m-plain", "--verified"),
        ({"threshold": 0.9}, "m-plain", "--threshold"),
        ({"band_buckets": 64}, "m-plain", "--band-buckets"),
    ):
        [refused] = served(redis_server, [(f"/v1/indexes/{name}/near", near)], **config)
        error = refused.json()["error"]
        assert refused.status_code == 409 and error["code"] == "configuration_mismatch", refused.text
        assert f"leave out {named}," in error["message"], error
    assert not verified(redis_server, "m-plain") and verified(redis_server, "m-verified")


def test_serve_carries_plain_to_its_workers(redis_server: ServerProcess, tmp_path: Path) -> None:
    open_index("m-serve-v", redis_server.url, verified=True)
    with ServiceProcess(redis_server.url, tmp_path, options=["--plain"]) as service:
        added = httpx.post(f"{service.url}/v1/indexes/m-serve-plain/add", json={"id": "a", "text": TEXT})
        assert added.status_code == 200, added.text
        refused = httpx.post(f"{service.url}/v1/indexes/m-serve-v/near", json={"text": TEXT})
        assert refused.status_code == 409 and "leave out --plain" in refused.json()["error"]["message"]
    assert not verified(redis_server, "m-serve-plain")


def test_plain_with_verified_modes_arguments_is_refused() -> None:
    from simhash_redis import InvalidArgument

    with pytest.raises(InvalidArgument, match="--plain cannot go with --threshold"):
        ServiceConfig(verified=False, threshold=0.9).check()


def test_serve_creates_with_its_options_and_serves_existing_indexes_as_they_were_made(
    redis_server: ServerProcess,
) -> None:
    # One service serves every index on the server: its options make the indexes it creates.
    open_index("m-v09", redis_server.url, threshold=0.9).add("a", TEXT)
    open_index("m-k5", redis_server.url, k=5).add("a", TEXT)
    near = {"json": {"text": TEXT}}
    answers = served(
        redis_server,
        [
            ("/v1/indexes/m-v09/near", near),
            ("/v1/indexes/m-k5/near", near),
            ("/v1/indexes/m-new/add", {"json": {"id": "a", "text": TEXT}}),
        ],
        k=3,
        threshold=0.8,
    )
    assert [a.status_code for a in answers] == [200, 200, 200], [a.text for a in answers]
    assert [a.json()["matches"][0]["id"] for a in answers[:2]] == ["a", "a"]
    client = redis_server.client()
    assert SimhashIndex(client, "m-k5", create=False).k == 5
    for name, threshold in (("m-v09", 0.9), ("m-new", 0.8)):
        mode = SimhashIndex(client, name, create=False).config.verification
        assert mode is not None and mode.threshold == threshold, name


def test_readyz_is_503_while_the_configured_index_is_of_the_other_mode(redis_server: ServerProcess) -> None:
    open_index("m-ready", redis_server.url, verified=True)
    app = create_app(
        ServiceConfig(redis_url=redis_server.url, access_log=False, index="m-ready", verified=False)
    )

    async def ready() -> httpx.Response:
        async with app.app.router.lifespan_context(app.app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://service") as client:
                return await client.get("/readyz")

    answer = asyncio.run(ready())
    assert answer.status_code == 503 and answer.json()["error"]["code"] == "configuration_mismatch"


def test_a_port_in_use_is_an_error_naming_it_not_bad_input(redis_server: ServerProcess) -> None:
    # uvicorn's own exit status, 3, is this command's code for bad input; it came out as it was.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = ["--redis-url", redis_server.url, "serve", "--port", str(port), "--no-access-log"]
        result = subprocess.run(
            [sys.executable, "-m", "simhash_redis.cli", *args], capture_output=True, text=True, timeout=60
        )
    assert result.returncode == 1, result.stderr
    last = result.stderr.splitlines()[-1]
    assert last == f"error: cannot serve on 127.0.0.1:{port}: the line above says why", result.stderr
