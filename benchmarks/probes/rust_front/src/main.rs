//! Design probe for issue #35, not product code: `POST /v1/indexes/{name}/near` of ONE plain index
//! (no retention window, not verified, default pigeonhole tables, a single lookup reading its own
//! fingerprint-map bucket whole), answered by a Rust front end: HTTP/1.1 keep-alive on a tokio
//! current-thread runtime, one raw RESP connection to Redis per HTTP connection, and the compiled
//! core's own kernels (fingerprint engine, Unicode tables, RESP set scanner, candidate filter) taken
//! from `native/src` by path, unchanged.
//!
//! Usage: `simhash-redis-rust-front CONFIG.json UNICODE.bin` (both written by `benchmarks.probe_rust_front`).
//! A text that needs Python's `unicodedata` (astral code points, composing marks, images the tables
//! leave to `normalize`) is answered 501: the probe counts how often that happens.

#![allow(dead_code)]

#[path = "../../../../native/src/candidates.rs"]
mod candidates;
#[path = "../../../../native/src/engine.rs"]
mod engine;
#[path = "../../../../native/src/error.rs"]
mod error;
#[path = "../../../../native/src/hash.rs"]
mod hash;
#[path = "../../../../native/src/resolver.rs"]
mod resolver;
#[path = "../../../../native/src/setreplies.rs"]
mod setreplies;
#[path = "../../../../native/src/sums.rs"]
mod sums;
#[path = "../../../../native/src/tokenize.rs"]
mod tokenize;
#[path = "../../../../native/src/unicode.rs"]
mod unicode;

use std::borrow::Cow;
use std::io::Write as _;
use std::rc::Rc;

use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::engine::{Config as Scheme, Job};
use crate::resolver::{Answers, Resolver};
use crate::unicode::{Parts, Tables, UnicodeState};

#[derive(Deserialize)]
struct TableSpec {
    prefix: String,
    width: usize,
    plan: Vec<(u32, u64, u32)>,
}

#[derive(Deserialize)]
struct SchemeSpec {
    features: String,
    n: usize,
    binary: bool,
    seed: u64,
    stopwords: Vec<String>,
}

#[derive(Deserialize)]
struct Spec {
    name: String,
    f: u32,
    k: u32,
    id_buckets: u64,
    fp_prefix: String,
    tables: Vec<TableSpec>,
    scheme: SchemeSpec,
    chunk_chars: usize,
    redis: String,
    listen: String,
}

/// What every connection shares: the index's configuration, the scheme, the Unicode data.
struct Index {
    spec: Spec,
    scheme: Scheme,
    unicode: UnicodeState,
    path: Vec<u8>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Query {
    text: Option<String>,
    fingerprint: Option<String>,
    k: Option<u32>,
    threshold: Option<f64>,
}

/// A request's failure: the HTTP status and the problem's detail.
struct Refused(u16, String);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        eprintln!("usage: simhash-redis-rust-front CONFIG.json UNICODE.bin");
        std::process::exit(2);
    }
    let spec: Spec =
        serde_json::from_slice(&std::fs::read(&args[1]).expect("config")).expect("config JSON");
    let scheme = Scheme::new(
        &spec.scheme.features,
        spec.scheme.n,
        spec.f,
        spec.scheme.binary,
        spec.scheme.seed,
        spec.scheme.stopwords.clone(),
    )
    .unwrap_or_else(|_| panic!("bad scheme"));
    assert!(spec.f <= 64, "the probe serves f <= 64 only");
    let unicode = load_unicode(&std::fs::read(&args[2]).expect("unicode data"));
    let path = format!("/v1/indexes/{}/near", spec.name).into_bytes();
    let index = Rc::new(Index {
        spec,
        scheme,
        unicode,
        path,
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .expect("runtime");
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async move {
        let listener = TcpListener::bind(&index.spec.listen).await.expect("listen");
        println!("listening on {}", index.spec.listen);
        let _ = std::io::stdout().flush();
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                continue;
            };
            let index = Rc::clone(&index);
            tokio::task::spawn_local(async move {
                // A client closing its connection mid-read (wrk at its end) is no failure.
                if let Err(err) = serve(socket, &index).await {
                    if err.kind() != std::io::ErrorKind::ConnectionReset {
                        eprintln!("connection: {err}");
                    }
                }
            });
        }
    });
}

/// The tables and the parts of every flagged BMP code point, as `probe_rust_front` wrote them.
fn load_unicode(data: &[u8]) -> UnicodeState {
    const BMP: usize = 1 << 16;
    let state = UnicodeState::default();
    let (raw, rest) = data.split_at(8 * BMP);
    let (classes, rest) = rest.split_at(BMP);
    let (space, mut rest) = rest.split_at(BMP);
    state.set_tables(Tables::from_bytes(raw, classes, space).expect("tables"));
    let u32_at = |rest: &mut &[u8]| {
        let (head, tail) = rest.split_at(4);
        *rest = tail;
        u32::from_le_bytes(head.try_into().expect("4 bytes"))
    };
    let count = u32_at(&mut rest);
    for _ in 0..count {
        let cp = u32_at(&mut rest);
        let present = rest[0];
        rest = &rest[1..];
        if present == 0 {
            state.set_parts(cp, None);
            continue;
        }
        let n = u32_at(&mut rest) as usize;
        let cps: Vec<u32> = (0..n).map(|_| u32_at(&mut rest)).collect();
        let cls = rest[..n].to_vec();
        let composing = rest[n] != 0;
        rest = &rest[n + 1..];
        let m = u32_at(&mut rest) as usize;
        let image: Vec<u32> = (0..m).map(|_| u32_at(&mut rest)).collect();
        state.set_parts(
            cp,
            Some(Parts {
                cps,
                cls,
                composing,
                image,
            }),
        );
    }
    state
}

/// One HTTP connection: requests read in turn (keep-alive), each answered before the next is read.
async fn serve(mut socket: TcpStream, index: &Index) -> std::io::Result<()> {
    socket.set_nodelay(true)?;
    let mut redis = TcpStream::connect(&index.spec.redis).await?;
    redis.set_nodelay(true)?;
    let mut rbuf: Vec<u8> = Vec::with_capacity(1 << 16);
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 16);
    let mut out: Vec<u8> = Vec::with_capacity(1 << 12);
    loop {
        // Head and body of one request.
        let (head_len, method_post, target, length) = loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut req = httparse::Request::new(&mut headers);
            match req.parse(&buf) {
                Ok(httparse::Status::Complete(n)) => {
                    let length = req
                        .headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                        .and_then(|h| {
                            std::str::from_utf8(h.value)
                                .ok()?
                                .trim()
                                .parse::<usize>()
                                .ok()
                        })
                        .unwrap_or(0);
                    let post = req.method == Some("POST");
                    let target = req.path.unwrap_or("").as_bytes().to_vec();
                    break (n, post, target, length);
                }
                Ok(httparse::Status::Partial) => {}
                Err(_) => return Ok(()),
            }
            if socket.read_buf(&mut buf).await? == 0 {
                return Ok(());
            }
        };
        while buf.len() < head_len + length {
            if socket.read_buf(&mut buf).await? == 0 {
                return Ok(());
            }
        }
        let body = &buf[head_len..head_len + length];
        let answer = if target == b"/healthz" && !method_post {
            Ok(b"{\"status\":\"ok\"}".to_vec())
        } else if target == index.path && method_post {
            near(index, body, &mut redis, &mut rbuf).await
        } else {
            Err(Refused(404, "no such endpoint in the probe".into()))
        };
        out.clear();
        match answer {
            Ok(json) => {
                write!(out, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", json.len())?;
                out.extend_from_slice(&json);
            }
            Err(Refused(status, detail)) => {
                let json =
                    serde_json::json!({"title": "refused", "status": status, "detail": detail})
                        .to_string();
                write!(out, "HTTP/1.1 {status} X\r\ncontent-type: application/problem+json\r\ncontent-length: {}\r\n\r\n{json}", json.len())?;
            }
        }
        socket.write_all(&out).await?;
        buf.drain(..head_len + length);
    }
}

/// The fingerprint of a query's text, or of its given fingerprint.
fn query_fp(index: &Index, query: &Query) -> Result<u64, Refused> {
    let f = index.spec.f;
    match (&query.text, &query.fingerprint) {
        (Some(text), None) => {
            let answers = Answers::default();
            let mut resolver = Resolver::new(&index.unicode, &answers);
            let job = Job::Text(Cow::Borrowed(text.as_str()));
            let fp = engine::fingerprint(
                &index.scheme,
                &job,
                index.spec.chunk_chars.max(1),
                &mut resolver,
            );
            if !resolver.take_needs().is_empty() {
                return Err(Refused(501, "this text needs Python's unicodedata".into()));
            }
            Ok(fp as u64)
        }
        (None, Some(given)) => {
            let hex = given
                .strip_prefix("0x")
                .or_else(|| given.strip_prefix("0X"));
            let parsed = match hex {
                Some(digits) => u64::from_str_radix(digits, 16).ok(),
                None if given.bytes().all(|b| b.is_ascii_digit()) => given.parse::<u64>().ok(),
                None => given.parse::<i64>().ok().map(|v| v as u64),
            };
            match parsed {
                Some(v) if f == 64 || v >> f == 0 => Ok(v),
                _ => Err(Refused(
                    422,
                    format!("not a fingerprint of {f} bits: {given:?}"),
                )),
            }
        }
        _ => Err(Refused(
            422,
            "give exactly one of text and fingerprint".into(),
        )),
    }
}

/// RESP of one command.
fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    let _ = write!(out, "*{}\r\n", args.len());
    for arg in args {
        let _ = write!(out, "${}\r\n", arg.len());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// Read from Redis until `enough(buffer)` gives the end of the replies wanted.
async fn read_until(
    redis: &mut TcpStream,
    rbuf: &mut Vec<u8>,
    enough: impl Fn(&[u8]) -> Result<Option<usize>, Refused>,
) -> Result<usize, Refused> {
    loop {
        if let Some(end) = enough(rbuf)? {
            return Ok(end);
        }
        match redis.read_buf(rbuf).await {
            Ok(0) | Err(_) => return Err(Refused(503, "Redis connection lost".into())),
            Ok(_) => {}
        }
    }
}

/// A reply's end, and where each of its bulk strings lies (None for a null).
type Bulks = (usize, Vec<Option<(usize, usize)>>);

/// The end of `want` bulk-string (or null) replies from `pos`, None while partial.
fn bulks_end(data: &[u8], mut pos: usize, want: usize) -> Result<Option<Bulks>, Refused> {
    let mut spans = Vec::with_capacity(want);
    for _ in 0..want {
        if pos >= data.len() {
            return Ok(None);
        }
        if data[pos] != b'$' {
            return Err(Refused(500, "unexpected Redis reply".into()));
        }
        let Some(cr) = memchr::memchr(b'\r', &data[pos..]) else {
            return Ok(None);
        };
        let digits = std::str::from_utf8(&data[pos + 1..pos + cr]).unwrap_or("");
        let len: i64 = digits
            .parse()
            .map_err(|_| Refused(500, "bad bulk length".into()))?;
        let start = pos + cr + 2;
        if len < 0 {
            if start > data.len() {
                return Ok(None);
            }
            spans.push(None);
            pos = start;
            continue;
        }
        let end = start + len as usize;
        if end + 2 > data.len() {
            return Ok(None);
        }
        spans.push(Some((start, end)));
        pos = end + 2;
    }
    Ok(Some((pos, spans)))
}

/// The ids of a stored id list (netstrings).
fn decode_ids(raw: &[u8]) -> Result<Vec<String>, Refused> {
    let bad = || {
        Refused(
            500,
            "the index holds an entry this library did not write".into(),
        )
    };
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < raw.len() {
        let colon = pos + memchr::memchr(b':', &raw[pos..]).ok_or_else(bad)?;
        let digits = &raw[pos..colon];
        if digits.is_empty()
            || !digits.iter().all(u8::is_ascii_digit)
            || (digits[0] == b'0' && digits.len() > 1)
        {
            return Err(bad());
        }
        let len: usize = std::str::from_utf8(digits)
            .map_err(|_| bad())?
            .parse()
            .map_err(|_| bad())?;
        let start = colon + 1;
        if start + len > raw.len() {
            return Err(bad());
        }
        out.push(String::from_utf8(raw[start..start + len].to_vec()).map_err(|_| bad())?);
        pos = start + len;
    }
    Ok(out)
}

/// `SimhashIndex.near` of one query (the whole-bucket single lookup of `Reads.lookup`), as JSON.
async fn near(
    index: &Index,
    body: &[u8],
    redis: &mut TcpStream,
    rbuf: &mut Vec<u8>,
) -> Result<Vec<u8>, Refused> {
    let query: Query = serde_json::from_slice(body).map_err(|e| Refused(422, e.to_string()))?;
    if query.threshold.is_some() {
        return Err(Refused(422, "threshold is for a verified index".into()));
    }
    let spec = &index.spec;
    let k = query.k.unwrap_or(spec.k);
    if k > spec.k {
        return Err(Refused(
            422,
            format!("k must be at most the index's k ({})", spec.k),
        ));
    }
    let fp = query_fp(index, &query)?;
    let f = spec.f;
    let wrap64 = f == 64;
    // First round trip: every table's set of this fingerprint, and its own fingerprint-map bucket.
    let own = fp % spec.id_buckets;
    let own_key = format!("{}{}", spec.fp_prefix, own);
    let mut out = Vec::with_capacity(512);
    for table in &spec.tables {
        let value = table
            .plan
            .iter()
            .fold(0u64, |acc, &(shift, mask, position)| {
                acc | (((fp >> shift) & mask) << position)
            });
        let key = format!("{}{:0width$x}", table.prefix, value, width = table.width);
        command(&mut out, &[b"SMEMBERS", key.as_bytes()]);
    }
    command(&mut out, &[b"HGETALL", own_key.as_bytes()]);
    rbuf.clear();
    redis
        .write_all(&out)
        .await
        .map_err(|_| Refused(503, "Redis connection lost".into()))?;
    let want = spec.tables.len() + 1;
    let end = read_until(redis, rbuf, |data| {
        let (end, found, other) = setreplies::scan(data, 0, want);
        if other {
            return Err(Refused(500, "unexpected Redis reply".into()));
        }
        Ok((found == want).then_some(end))
    })
    .await?;
    // The candidates within k, each distinct stored value once, in the order met.
    let mut found: Vec<(Vec<u8>, u64, u32)> = Vec::new();
    let mut pos = 0;
    let mut corrupt = false;
    for _ in 0..spec.tables.len() {
        pos = setreplies::members(&rbuf[..end], pos, |member| {
            match candidates::candidate(member, u128::from(fp), wrap64) {
                Some((value, d)) if d <= k => {
                    if !found.iter().any(|(raw, _, _)| raw.as_slice() == member) {
                        found.push((member.to_vec(), value as u64, d));
                    }
                }
                Some(_) => {}
                None => corrupt = true,
            }
        })
        .ok_or_else(|| Refused(500, "unexpected Redis reply".into()))?;
    }
    if corrupt {
        return Err(Refused(
            500,
            "the index holds an entry this library did not write".into(),
        ));
    }
    let mut ids_of: Vec<Vec<String>> = vec![Vec::new(); found.len()];
    let mine: Vec<usize> = (0..found.len())
        .filter(|&i| found[i].1 % spec.id_buckets == own)
        .collect();
    if !mine.is_empty() {
        let fields: Vec<&[u8]> = mine.iter().map(|&i| found[i].0.as_slice()).collect();
        let values = setreplies::hash_fields(&rbuf[pos..end], &fields)
            .map_err(|_| Refused(500, "unexpected Redis reply".into()))?;
        for (&i, value) in mine.iter().zip(values) {
            if let Some(raw) = value {
                ids_of[i] = decode_ids(raw)?;
            }
        }
    }
    // Second round trip: the ids of the candidates stored in other buckets.
    let others: Vec<usize> = (0..found.len())
        .filter(|&i| found[i].1 % spec.id_buckets != own)
        .collect();
    if !others.is_empty() {
        out.clear();
        for &i in &others {
            let key = format!("{}{}", spec.fp_prefix, found[i].1 % spec.id_buckets);
            command(&mut out, &[b"HGET", key.as_bytes(), &found[i].0]);
        }
        rbuf.clear();
        redis
            .write_all(&out)
            .await
            .map_err(|_| Refused(503, "Redis connection lost".into()))?;
        let want = others.len();
        read_until(redis, rbuf, |data| {
            Ok(bulks_end(data, 0, want)?.map(|(end, _)| end))
        })
        .await?;
        let (_, spans) = bulks_end(rbuf, 0, want)?.expect("whole");
        for (&i, span) in others.iter().zip(spans) {
            if let Some((start, stop)) = span {
                ids_of[i] = decode_ids(&rbuf[start..stop])?;
            }
        }
    }
    Ok(answer(f, found.iter().map(|(_, v, d)| (*v, *d)), ids_of))
}

/// The service's JSON answer: the matches nearest first, then by id.
fn answer(f: u32, found: impl Iterator<Item = (u64, u32)>, ids_of: Vec<Vec<String>>) -> Vec<u8> {
    let mut matches: Vec<(u32, String, u64)> = Vec::new();
    for ((value, d), ids) in found.zip(ids_of) {
        for id in ids {
            matches.push((d, id, value));
        }
    }
    matches.sort_unstable_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    let mut out = Vec::with_capacity(32 + 80 * matches.len());
    out.extend_from_slice(b"{\"matches\":[");
    for (n, (d, id, value)) in matches.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"id\":");
        serde_json::to_writer(&mut out, id).expect("a string");
        let _ = write!(
            out,
            ",\"distance\":{d},\"fingerprint\":\"0x{value:0width$x}\"}}",
            width = (f / 4) as usize
        );
    }
    out.extend_from_slice(b"]}");
    out
}
