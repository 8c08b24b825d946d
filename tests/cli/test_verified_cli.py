"""The command line on a verified index: created with --verified, then used by every command."""

from __future__ import annotations

import json
import random
from pathlib import Path

import redis

from simhash_redis import SimhashIndex, VerifiedIndex
from simhash_redis.codec import decode_sketches, encode_fp, encode_sketches
from tests.cli.conftest import Invoke, write_jsonl
from tests.test_verified_one_writer import page, templated

_VOCAB = [f"word{i}" for i in range(3000)]
VERIFIED = ("--k", "8", "--layout", "permuted-10", "--verified")


def story(seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(_VOCAB) for _ in range(300))


def one_word_edit(text: str, seed: int) -> str:
    words = text.split()
    rng = random.Random(seed)
    words[rng.randrange(len(words))] = rng.choice(_VOCAB)
    return " ".join(words)


def test_add_and_near_on_a_verified_index(invoke: Invoke, redis_client: redis.Redis) -> None:
    text = story(1)
    assert invoke(*VERIFIED, "add", "a", text, index="v").exit_code == 0
    assert invoke(*VERIFIED, "add", "b", story(2), index="v").exit_code == 0
    meta = redis_client.hget(b"simhash:v:meta", b"verified")
    assert meta == b"odd;bits=1008;n=3;seed=0;threshold=0.8;bands=8x4;band_buckets=16384"
    # Any later command adopts the mode; near prints the estimated Jaccard as a fourth column.
    found = invoke("near", one_word_edit(text, 3), index="v")
    assert found.exit_code == 0, found.output
    [line] = found.stdout.splitlines()
    doc_id, _, _, jaccard = line.split("\t")
    assert doc_id == "a" and 0.8 <= float(jaccard) <= 1
    rows = json.loads(invoke("near", text, "--json", index="v").stdout)
    assert [(r["id"], r["jaccard"]) for r in rows] == [("a", 1.0)]
    stats = json.loads(invoke("stats", "--json", index="v").stdout)
    assert stats["config"]["verified"] == meta.decode()
    removed = invoke("remove", "a", index="v")
    assert removed.exit_code == 0 and "removed 1 of 1" in removed.stdout
    assert VerifiedIndex(SimhashIndex(redis_client, "v")).sketch_of("a") is None


def test_mismatched_or_impossible_requests_are_refused(invoke: Invoke) -> None:
    assert invoke("--plain", "add", "a", story(1), index="plain").exit_code == 0
    refused = invoke("--verified", "near", story(1), index="plain")
    assert refused.exit_code == 5 and "is not verified" in refused.stderr
    assert invoke("--threshold", "0.9", "add", "a", story(1), index="v9").exit_code == 0
    other = invoke("near", story(1), "--threshold", "0.8", index="v9")
    assert other.exit_code == 5 and "threshold 0.9" in other.stderr
    bad = invoke("--threshold", "1.5", "add", "a", story(1), index="v15")
    assert bad.exit_code == 2 and "threshold" in bad.stderr and "Traceback" not in bad.output
    by_fp = invoke("near", "--fingerprint", "0x1", index="v9")
    assert by_fp.exit_code == 2 and "not --fingerprint" in by_fp.stderr


def test_load_and_dedupe_write_sketches_from_the_workers(
    invoke: Invoke, redis_client: redis.Redis, tmp_path: Path
) -> None:
    originals = [{"id": f"s{i}", "text": story(100 + i)} for i in range(150)]
    edits = [{"id": f"e{i}", "text": one_word_edit(story(100 + i), i)} for i in range(0, 150, 3)]
    loaded = invoke(
        *VERIFIED, "load", str(write_jsonl(tmp_path / "a.jsonl", originals)), "-j", "2", index="n"
    )
    assert loaded.exit_code == 0, loaded.output
    verified = VerifiedIndex(SimhashIndex(redis_client, "n"))
    assert all(
        verified.sketch_of(row["id"]) == verified.hasher.stored_sketch(row["text"]) for row in originals
    )
    deduped = invoke("dedupe", str(write_jsonl(tmp_path / "e.jsonl", edits)), "-j", "2", index="n")
    assert deduped.exit_code == 0, deduped.output
    pairs = sorted(tuple(line.split("\t")[:2]) for line in deduped.stdout.splitlines())
    assert pairs == sorted((f"e{i}", f"s{i}") for i in range(0, 150, 3))
    assert verified.sketch_of("e0") is None and len(verified.index) == 150
    fps = write_jsonl(tmp_path / "fp.jsonl", [{"id": "x", "fp": "0x1"}])
    refused = invoke("load", str(fps), "--fingerprint-field", "fp", index="n")
    assert refused.exit_code == 2 and "precomputed fingerprints" in refused.stderr


def test_dedupe_dry_run_on_a_verified_index(
    invoke: Invoke, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """Checked against the index (the verified near) and the run's earlier documents; nothing written."""
    originals = [{"id": f"s{i}", "text": story(300 + i)} for i in range(60)]
    loaded = invoke(*VERIFIED, "load", str(write_jsonl(tmp_path / "a.jsonl", originals)), "-q", index="d")
    assert loaded.exit_code == 0, loaded.output
    batch = [{"id": f"e{i}", "text": one_word_edit(story(300 + i), i)} for i in range(0, 60, 6)]
    batch += [{"id": f"n{i}", "text": story(900 + i)} for i in range(5)]  # new stories ...
    batch += [{"id": f"m{i}", "text": one_word_edit(story(900 + i), i)} for i in range(5)]  # ... and copies
    batch += [{"id": "s7", "text": story(307)}]  # stored already: itself, not a pair
    before = redis_client.dbsize()
    dry = invoke(
        "dedupe", "--dry-run", "--json", "-j", "1", str(write_jsonl(tmp_path / "b.jsonl", batch)), index="d"
    )
    assert dry.exit_code == 0, dry.output
    pairs = sorted((row["id"], row["duplicate_of"]) for row in map(json.loads, dry.stdout.splitlines()))
    want = [(f"e{i}", f"s{i}") for i in range(0, 60, 6)] + [(f"m{i}", f"n{i}") for i in range(5)]
    assert pairs == sorted(want)
    assert "5 added" in dry.stderr and "1 unchanged" in dry.stderr and "15 duplicates" in dry.stderr
    assert redis_client.dbsize() == before and len(SimhashIndex(redis_client, "d")) == 60  # nothing written
    grouped = invoke("dedupe", "--dry-run", "--groups", "-q", str(tmp_path / "b.jsonl"), index="d")
    assert grouped.exit_code == 0 and len(grouped.stdout.splitlines()) == 15, grouped.output


def test_export_import_and_verify_keep_the_sketches(
    invoke: Invoke, redis_client: redis.Redis, tmp_path: Path
) -> None:
    rows = [{"id": f"s{i}", "text": story(200 + i)} for i in range(40)]
    assert (
        invoke(*VERIFIED, "load", str(write_jsonl(tmp_path / "a.jsonl", rows)), "-q", index="src").exit_code
        == 0
    )
    dump = tmp_path / "src.dump"
    assert invoke("export", "-o", str(dump), "-q", index="src").exit_code == 0
    imported = invoke("import", str(dump), "-q", index="dst")
    assert imported.exit_code == 0, imported.output
    source, copy = (VerifiedIndex(SimhashIndex(redis_client, name)) for name in ("src", "dst"))
    assert copy.verification == source.verification
    assert all(copy.sketch_of(r["id"]) == source.sketch_of(r["id"]) is not None for r in rows)
    assert [m.id for m in copy.near(one_word_edit(rows[5]["text"], 1))] == ["s5"]
    assert json.loads(invoke("verify", "--json", index="dst").stdout)["ok"] is True
    # A sketch whose document is gone is an orphan that repair removes; a document without its
    # sketch is reported (its text is not stored to make one again).
    keys = copy.index.keys
    for doc_id, change in (("s2", {"ghost": b"x" * 256}), ("s1", {"s1": None})):
        fp = encode_fp(copy.index.get(doc_id) or 0, 64)
        stored = decode_sketches(redis_client.hget(keys.fp_bucket(fp), keys.sketch_field(fp)) or b"")
        stored.update(change)
        pairs = [(i.encode(), sketch) for i, sketch in stored.items() if sketch is not None]
        redis_client.hset(keys.fp_bucket(fp), keys.sketch_field(fp), encode_sketches(pairs))
    report = json.loads(invoke("verify", "--json", "--repair", index="dst").stdout)
    assert report["problems"] == {"sketch without a document": 1, "documents without a sketch": 1}
    assert copy.sketch_of("ghost") is None


def test_verify_counts_the_documents_without_a_sketch_and_says_what_mends_them(
    invoke: Invoke, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """Three documents whose sketches were lost were counted as one problem ("documents without a sketch:
    1"), and once --repair had done what it can (no sketch without the text), it said to run it again."""
    rows = [{"id": f"s{i}", "text": story(300 + i)} for i in range(10)]
    assert invoke("load", str(write_jsonl(tmp_path / "a.jsonl", rows)), "-q", index="lost").exit_code == 0
    index = SimhashIndex(redis_client, "lost")
    for doc_id in ("s1", "s4", "s7"):
        fp = encode_fp(index.get(doc_id) or 0, 64)
        redis_client.hdel(index.keys.fp_bucket(fp), index.keys.sketch_field(fp))
    for options in ((), ("--repair",)):
        checked = invoke("verify", *options, index="lost")
        assert checked.exit_code == 1, checked.output
        assert "  documents without a sketch: 3\n" in checked.stdout
        assert "--repair" not in checked.stderr and "again with their texts" in checked.stderr
    assert json.loads(invoke("verify", "--json", index="lost").stdout)["problems"] == {
        "documents without a sketch": 3
    }
    assert invoke("load", str(tmp_path / "a.jsonl"), "-q", index="lost").exit_code == 0
    assert invoke("verify", index="lost").exit_code == 0


def test_a_plain_dump_is_not_merged_into_a_verified_index(invoke: Invoke, tmp_path: Path) -> None:
    assert invoke("--plain", "add", "a", story(1), index="plain").exit_code == 0
    dump = tmp_path / "plain.dump"
    assert invoke("export", "-o", str(dump), "-q", index="plain").exit_code == 0
    # The same configuration but for the verified mode (a dump's other differences are refused anyway).
    assert invoke("--verified", "add", "b", story(2), index="v").exit_code == 0
    refused = invoke("import", str(dump), "--merge", "-q", index="v")
    assert refused.exit_code == 2 and "dump is of a plain index" in refused.stderr


def test_restore_meta_keeps_the_verified_mode(invoke: Invoke, redis_client: redis.Redis) -> None:
    assert invoke(*VERIFIED, "--threshold", "0.85", "add", "a", story(1), index="v").exit_code == 0
    redis_client.delete(b"simhash:v:meta")
    plain = invoke("--k", "8", "--layout", "permuted-10", "restore-meta", index="v")
    assert plain.exit_code == 5 and "holds sketches" in plain.stderr
    assert redis_client.exists(b"simhash:v:meta") == 0
    again = invoke("--k", "8", "--layout", "permuted-10", "--threshold", "0.85", "restore-meta", index="v")
    assert again.exit_code == 0, again.output
    restored = VerifiedIndex(SimhashIndex(redis_client, "v"))
    assert restored.threshold == 0.85
    assert [m.id for m in restored.near(one_word_edit(story(1), 5))] == ["a"]


def test_dedupe_groups_of_template_pages_with_one_writer(invoke: Invoke, tmp_path: Path) -> None:
    """Pages of one template (2,000 manual pages did it) share band values: one writer, -j 1, used to stop
    with "kept meeting concurrent writes"."""
    rows = [{"id": doc_id, "text": text} for doc_id, text in templated(400, 40)]
    pages = str(write_jsonl(tmp_path / "m.jsonl", rows))
    done = invoke("--verified", "dedupe", "--groups", "-j", "1", "-q", pages, index="man")
    assert done.exit_code == 0, done.output
    groups = {line.split("\t")[1]: line.split("\t")[2].split(",") for line in done.stdout.splitlines()}
    assert all(f"e{i}" in groups.get(f"p{i}", []) for i in range(0, 400, 40)), done.stdout


def test_dedupe_rerun_over_changed_pages_with_one_writer(invoke: Invoke, tmp_path: Path) -> None:
    """dedupe run again on a re-crawl where half the pages of one template changed (same ids, texts
    changed beyond k): the rewritten pages used to keep the pages after them out, one per round, until
    "kept meeting concurrent writes" with one writer."""
    first = [{"id": f"p{i}", "text": page(10_000 + i)} for i in range(1, 200, 2)]
    before = str(write_jsonl(tmp_path / "a.jsonl", first))
    done = invoke("--verified", "dedupe", "-j", "1", "-q", before, index="rc")
    assert done.exit_code == 0, done.output
    rows = [{"id": doc_id, "text": text} for doc_id, text in templated(200, 40)]
    changed = str(write_jsonl(tmp_path / "b.jsonl", rows))
    again = invoke("dedupe", "--groups", "-j", "1", "-q", changed, index="rc")
    assert again.exit_code == 0, again.output
    groups = {line.split("\t")[1]: line.split("\t")[2].split(",") for line in again.stdout.splitlines()}
    assert all(f"e{i}" in groups.get(f"p{i}", []) for i in range(0, 200, 40)), again.stdout


def test_the_command_line_sizes_a_new_index(invoke: Invoke, redis_client: redis.Redis) -> None:
    sized = ("--verified", "--id-buckets", "256", "--band-buckets", "32")
    result = invoke(*sized, "add", "a", story(1), index="cli-sized")
    assert result.exit_code == 0, result.output
    meta = redis_client.hgetall(b"simhash:cli-sized:meta")
    assert meta[b"id_buckets"] == b"256" and meta[b"verified"].endswith(b";band_buckets=32")
    # Later commands adopt them, or state the same; other numbers are a mismatch (exit 5), named.
    assert invoke("add", "b", story(2), index="cli-sized").exit_code == 0
    assert invoke(*sized, "near", story(2), index="cli-sized").exit_code == 0
    for option, value in (("--band-buckets", "64"), ("--id-buckets", "512")):
        other = invoke("--verified", option, value, "near", story(2), index="cli-sized")
        assert other.exit_code == 5, other.output
        assert option in other.output and "Traceback" not in other.output


def test_band_buckets_with_plain_is_a_usage_error(invoke: Invoke, redis_client: redis.Redis) -> None:
    result = invoke("--plain", "--band-buckets", "32", "add", "a", story(1), index="cli-plain")
    assert result.exit_code == 2 and "--plain cannot go with --band-buckets" in result.output
    assert not redis_client.exists(b"simhash:cli-plain:meta")
    # Without --plain, --band-buckets sizes the new index verified, as --verified --band-buckets does.
    assert invoke("--band-buckets", "32", "add", "a", story(1), index="cli-v").exit_code == 0
    assert redis_client.hget(b"simhash:cli-v:meta", b"verified").endswith(b";band_buckets=32")
    for value in ("0", "x"):
        assert invoke("--verified", "--band-buckets", value, "add", "a", "t", index="cli-bad").exit_code == 2
    assert not redis_client.exists(b"simhash:cli-bad:meta")


def test_fingerprint_files_are_refused_once_by_a_verified_index(
    invoke: Invoke, redis_client: redis.Redis, tmp_path: Path
) -> None:
    assert invoke("--verified", "add", "a", story(1), index="v").exit_code == 0
    fps = tmp_path / "a.fp"
    fps.write_text("".join(f"f{i}\t{i + 1}\n" for i in range(50)))
    for args in ([str(fps)], ["--format", "fingerprints", "-"], [str(fps), "--max-errors", "1000"]):
        refused = invoke("load", *args, input=fps.read_text(), index="v")
        assert refused.exit_code == 2, (args, refused.output)
        assert refused.stderr.count("\n") == 1 and "precomputed fingerprints" in refused.stderr
    assert len(SimhashIndex(redis_client, "v")) == 1
    # --verified for a new index: refused before it is made, not made, failed line by line and dropped.
    new = invoke("--verified", "load", str(fps), index="new")
    assert new.exit_code == 2 and "leave out --verified" in new.stderr, new.output
    assert not SimhashIndex.exists(redis_client, "new")
    assert invoke("load", str(fps), index="new").exit_code == 0  # plain, made from fingerprints


def test_texts_and_fingerprint_files_loaded_together_make_a_plain_index(
    invoke: Invoke, redis_client: redis.Redis, tmp_path: Path
) -> None:
    texts, fps = tmp_path / "a.txt", tmp_path / "b.fp"
    texts.write_text("".join(story(i) + "\n" for i in range(5)))
    fps.write_text("".join(f"f{i}\t{(i + 1) << 40}\n" for i in range(5)))
    loaded = invoke("load", str(texts), str(fps), index="mix")
    assert loaded.exit_code == 0, loaded.output
    index = SimhashIndex(redis_client, "mix")
    assert index.config.verification is None and len(index) == 10
