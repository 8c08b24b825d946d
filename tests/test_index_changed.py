"""A handle whose index was dropped, made again with another configuration, or switched to verified mode
by another worker refuses to write (it reads the meta again before a write once its copy is a second old)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
import redis

from simhash_redis import ConfigurationMismatch, IndexNotFound, SimhashIndex, VerifiedIndex
from simhash_redis.index import simhash_index
from simhash_redis.transport.wire import round_trips
from tests.servers import ServerProcess

TEXT = "the quick brown fox jumps over the lazy dog by the river bank today"


@pytest.fixture
def meta_read_each_write(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every write reads the meta again (the tests wait on no clock)."""
    monkeypatch.setattr(simhash_index, "META_TRUSTED", 0.0)
    yield


def _keys(client: redis.Redis, name: str) -> list[bytes]:
    return sorted(client.scan_iter(f"simhash:{name}:*"))


@pytest.mark.usefixtures("meta_read_each_write")
def test_a_write_to_a_dropped_index_is_refused_and_recreates_nothing(redis_client: redis.Redis) -> None:
    worker = SimhashIndex(redis_client, "gone")
    worker.add("a", 1)
    SimhashIndex(redis_client, "gone").drop()
    with pytest.raises(IndexNotFound, match="dropped since it was opened here"):
        worker.add("b", 2)
    with pytest.raises(IndexNotFound):
        worker.remove("a")
    with pytest.raises(IndexNotFound):
        worker.bulk_add([("c", 3)])
    assert _keys(redis_client, "gone") == []
    # Opened again, it is created afresh.
    SimhashIndex(redis_client, "gone").add("b", 2)


@pytest.mark.usefixtures("meta_read_each_write")
def test_an_index_made_again_with_another_configuration_is_not_written_with_the_old_one(
    redis_client: redis.Redis,
) -> None:
    worker = SimhashIndex(redis_client, "remade")
    worker.add("a", 1)
    SimhashIndex(redis_client, "remade").drop()
    SimhashIndex(redis_client, "remade", k=5, f=32).add("z", 7)
    before = _keys(redis_client, "remade")
    with pytest.raises(ConfigurationMismatch, match=r"changed since it was opened here .*f, k, layout"):
        worker.add("b", 2)
    assert _keys(redis_client, "remade") == before
    assert SimhashIndex(redis_client, "remade").verify().ok


@pytest.mark.usefixtures("meta_read_each_write")
def test_a_plain_handle_stops_writing_once_another_worker_pins_verified_mode(
    redis_client: redis.Redis,
) -> None:
    plain = SimhashIndex(redis_client, "switched")  # created plain and empty
    verified = VerifiedIndex(SimhashIndex(redis_client, "switched"), convert=True)  # pins verified mode
    with pytest.raises(ConfigurationMismatch, match="verified"):
        plain.add("doc2", TEXT)
    verified.add("doc1", TEXT)
    assert [m.id for m in verified.near(TEXT)] == ["doc1"]
    assert verified.index.verify().ok


@pytest.mark.usefixtures("meta_read_each_write")
def test_a_verified_handle_refuses_writes_to_its_dropped_index(redis_client: redis.Redis) -> None:
    worker = VerifiedIndex.on_client(redis_client, "vgone")
    worker.add("a", TEXT)
    SimhashIndex(redis_client, "vgone").drop()
    for write in (
        lambda: worker.add("b", TEXT + " again"),
        lambda: worker.add_if_new("b", TEXT + " again"),
        lambda: worker.remove("a"),
    ):
        with pytest.raises(IndexNotFound):
            write()
    assert _keys(redis_client, "vgone") == []


@pytest.mark.usefixtures("meta_read_each_write")
def test_a_drop_in_the_middle_of_a_call_stops_its_next_batch(redis_client: redis.Redis) -> None:
    worker = SimhashIndex(redis_client, "midway", batch_size=10)
    other = SimhashIndex(redis_client, "midway")

    def drop_after_the_first(done: int, outcomes: object) -> None:
        if done == 10:
            other.drop()

    with pytest.raises(IndexNotFound):
        worker.add_many([(f"d{i}", i << 20) for i in range(50)], on_progress=drop_after_the_first)
    assert _keys(redis_client, "midway") == []


def test_while_the_meta_is_trusted_a_write_costs_no_round_trip_more(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(simhash_index, "META_TRUSTED", float("inf"))  # however slow the machine
    worker = SimhashIndex(redis_client, "trusted")
    worker.add("a", 1)
    before = round_trips()
    worker.add("b", 2)
    assert round_trips() - before == 1


@pytest.mark.usefixtures("meta_read_each_write")
def test_the_service_opens_afresh_an_index_dropped_or_made_again_under_it(
    redis_server: ServerProcess,
) -> None:
    """Single calls, reads and JSON Lines streams alike: never the old configuration."""
    pytest.importorskip("starlette")
    import httpx

    from simhash_redis.service.app import create_app
    from simhash_redis.service.config import ServiceConfig

    app = create_app(ServiceConfig(redis_url=redis_server.url, access_log=False))
    client = redis_server.client()
    lines = {"content-type": "application/x-ndjson"}

    async def run() -> list[httpx.Response]:
        async with app.app.router.lifespan_context(app.app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://service") as http:
                url = "/v1/indexes/svc-remade"
                answers = [await http.post(f"{url}/add", json={"id": "a", "text": TEXT})]
                SimhashIndex(client, "svc-remade").drop()
                SimhashIndex(client, "svc-remade", k=5, f=32).add("z", 7)
                answers.append(await http.post(f"{url}/near", json={"fingerprint": "0x7"}))
                answers.append(await http.post(f"{url}/add", json={"id": "b", "text": TEXT}))
                SimhashIndex(client, "svc-remade").drop()
                SimhashIndex(client, "svc-remade", k=4, f=32).add("y", 9)
                body = '{"id": "c", "fingerprint": "0x10"}\n'
                answers.append(await http.post(f"{url}/add/batch", content=body, headers=lines))
                return answers

    answers = asyncio.run(run())
    assert [a.status_code for a in answers] == [200] * 4, [a.text for a in answers]
    assert [m["id"] for m in answers[1].json()["matches"]] == ["z"]
    assert "error" not in answers[3].text, answers[3].text
    index = SimhashIndex(client, "svc-remade", create=False)
    # "b" went to the index made in between, dropped since: the one there now holds "y" and "c".
    assert (index.f, index.k, sorted(d for d in ("b", "c", "y") if index.get(d) is not None)) == (
        32,
        4,
        ["c", "y"],
    )
    assert index.verify().ok
