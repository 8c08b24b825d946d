//! The fingerprint engine: documents to fingerprints for one scheme, bit for bit as
//! `simhash_redis.fingerprinting.documents.fingerprint` computes them.
//!
//! Texts are cut by `split_chunks` (the pure engine does so past `CHUNK_CHARS`; below that the one
//! chunk is the whole text). Each chunk is normalised (ASCII here, other text through a `Normalizer`,
//! which never calls into Python: see `crate::resolver`) and tokenised, the tokens' hashes
//! concatenated; the features are every window of n token hashes (one feature of all tokens when
//! there are fewer than n), counted per bit (tf) or once per distinct hash (binary). "chars" features hash the characters of the whitespace-collapsed normalised text,
//! and a text without a single token has the fingerprint 0.

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::HashSet;

use crate::error::{value, Error};
use crate::hash::{for_each_feature, Lanes, Wide};
use crate::sums::{Counter, FloatSums};
use crate::tokenize::{ascii_tokens, collapse, has_token, norm_tokens, push_utf8, split_chunks};
use crate::unicode::{ascii_space, Norm};

/// Normalises non-ASCII text and answers whitespace questions about normalised code points.
///
/// Infallible by design: a normaliser that cannot answer (see `crate::resolver::Resolver`) notes what
/// it lacks and gives a stand-in, and its caller discards the result.
pub trait Normalizer {
    /// `Normalizer.normalize(text)` as code points and classes; the text is free of surrogates.
    fn normalize(&mut self, text: &str, out: &mut Norm);
    /// `chr(cp).isspace()` for a code point of a normalised text.
    fn is_space(&mut self, cp: u32) -> bool;
    /// Tokenise a non-ASCII text in one pass when the tables alone normalise it: true when done,
    /// false when the text needs `normalize` (the tokens given to `sink` must then be discarded).
    fn fast_tokens(&mut self, text: &str, buf: &mut Vec<u8>, sink: impl FnMut(&[u8])) -> bool;
}

/// The feature kind of a scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Word n-grams.
    Shingles,
    /// Words (n = 1).
    Words,
    /// Character n-grams.
    Chars,
}

/// A scheme, as the engine needs it.
#[derive(Debug)]
pub struct Config {
    /// The feature kind.
    pub kind: Kind,
    /// Tokens (or characters) per feature, 1 for words.
    pub n: usize,
    /// Fingerprint width: 32, 64 or 128.
    pub f: u32,
    /// Binary weighting (each distinct feature once) instead of tf.
    pub binary: bool,
    /// The xxh3 seed.
    pub seed: u64,
    /// Normalised stopwords, UTF-8.
    pub stop: HashSet<Vec<u8>>,
}

impl Config {
    /// A scheme's configuration: features ("shingles", "words", "chars"), n (1-16), f (32, 64,
    /// 128), binary weighting or tf, the xxh3 seed and the normalised stopwords.
    ///
    /// # Errors
    /// `Error::Value` for features, n or f out of range (the messages of `Scheme`'s checks).
    pub fn new(
        features: &str,
        n: usize,
        f: u32,
        binary: bool,
        seed: u64,
        stopwords: Vec<String>,
    ) -> Result<Config, Error> {
        let kind = match features {
            "shingles" => Kind::Shingles,
            "words" => Kind::Words,
            "chars" => Kind::Chars,
            other => {
                return Err(value(format!(
                    "features must be one of 'chars', 'shingles', 'words', got {other:?}"
                )))
            }
        };
        if !(1..=16).contains(&n) {
            return Err(value(format!("n must be between 1 and 16, got {n}")));
        }
        if ![32, 64, 128].contains(&f) {
            return Err(value(format!("f must be one of (32, 64, 128), got {f}")));
        }
        Ok(Config {
            kind,
            n: if kind == Kind::Words { 1 } else { n },
            f,
            binary,
            seed,
            stop: stopwords.into_iter().map(String::into_bytes).collect(),
        })
    }
}

/// One document, ready to be fingerprinted.
#[derive(Debug)]
pub enum Job<'a> {
    /// A text (surrogates already replaced by U+FFFD), cut into chunks past the chunk size.
    Text(Cow<'a, str>),
    /// A text never cut into chunks: caller-given tokens joined by spaces, for "chars".
    Whole(Cow<'a, str>),
    /// Caller-given tokens, raw (each normalised, not split again).
    Tokens(Vec<Cow<'a, str>>),
    /// Weighted features: normalised names (in first-seen order) and their summed weights.
    Weighted(Vec<(Cow<'a, str>, f64)>),
}

/// Reusable buffers of one thread.
#[derive(Default)]
pub struct Scratch<L> {
    norm: Norm,
    hashes: Vec<L>,
    feats: Vec<L>,
    buf: Vec<u8>,
    chars: Vec<u32>,
}

thread_local! {
    static NARROW: Cell<Scratch<u64>> = Cell::new(Scratch::default());
    static WIDE: Cell<Scratch<Wide>> = Cell::new(Scratch::default());
}

/// Run with this thread's buffers, taken out for the call and put back after.
fn with_scratch<L: Lanes + Default, T>(
    local: &'static std::thread::LocalKey<Cell<Scratch<L>>>,
    work: impl FnOnce(&mut Scratch<L>) -> T,
) -> T {
    let mut scratch = local.try_with(Cell::take).unwrap_or_default();
    let result = work(&mut scratch);
    // Buffers grown by a huge document are not kept.
    if scratch.hashes.capacity() <= 1 << 20 {
        let _ = local.try_with(|cell| cell.set(scratch));
    }
    result
}

/// Fingerprint one document under a scheme; `chunk` is `max(1, CHUNK_CHARS)` for texts.
pub fn fingerprint<N: Normalizer>(
    cfg: &Config,
    job: &Job<'_>,
    chunk: usize,
    normalizer: &mut N,
) -> u128 {
    if cfg.f == 128 {
        with_scratch(&WIDE, |scratch| {
            run::<Wide, N>(cfg, job, chunk, normalizer, scratch)
        })
    } else {
        with_scratch(&NARROW, |scratch| {
            run::<u64, N>(cfg, job, chunk, normalizer, scratch)
        })
    }
}

fn run<L: Lanes, N: Normalizer>(
    cfg: &Config,
    job: &Job<'_>,
    chunk: usize,
    normalizer: &mut N,
    scratch: &mut Scratch<L>,
) -> u128 {
    scratch.hashes.clear();
    match job {
        Job::Weighted(items) => {
            let mut sums = FloatSums::new(cfg.f);
            for (name, weight) in items {
                sums.add(L::hash(name.as_bytes(), cfg.seed).bits(), *weight);
            }
            sums.finish()
        }
        Job::Text(text) | Job::Whole(text) => {
            let size = if matches!(job, Job::Whole(_)) {
                usize::MAX
            } else {
                chunk
            };
            if cfg.kind == Kind::Chars {
                return chars_text(cfg, text, size, normalizer, scratch);
            }
            for piece in split_chunks(text, size) {
                text_tokens(cfg, piece, normalizer, scratch);
            }
            count(cfg, &scratch.hashes, &mut scratch.feats)
        }
        Job::Tokens(tokens) => {
            let Scratch {
                norm, hashes, buf, ..
            } = scratch;
            for token in tokens {
                let bytes: &[u8] = if token.is_ascii() {
                    buf.clear();
                    buf.extend(token.bytes().map(|b| b.to_ascii_lowercase()));
                    buf
                } else {
                    normalizer.normalize(token, norm);
                    buf.clear();
                    for &cp in &norm.cps {
                        push_utf8(buf, cp);
                    }
                    buf
                };
                if !bytes.is_empty() && !cfg.stop.contains(bytes) {
                    hashes.push(L::hash(bytes, cfg.seed));
                }
            }
            count(cfg, &scratch.hashes, &mut scratch.feats)
        }
    }
}

/// Append the hashes of a raw text's tokens, stopwords dropped.
fn text_tokens<L: Lanes, N: Normalizer>(
    cfg: &Config,
    text: &str,
    normalizer: &mut N,
    scratch: &mut Scratch<L>,
) {
    let Scratch {
        norm, hashes, buf, ..
    } = scratch;
    let seed = cfg.seed;
    let stop = &cfg.stop;
    if text.is_ascii() {
        if stop.is_empty() {
            ascii_tokens(text.as_bytes(), buf, |t| hashes.push(L::hash(t, seed)));
        } else {
            ascii_tokens(text.as_bytes(), buf, |t| {
                if !stop.contains(t) {
                    hashes.push(L::hash(t, seed));
                }
            });
        }
        return;
    }
    let mark = hashes.len();
    let keep = |t: &[u8]| stop.is_empty() || !stop.contains(t);
    if normalizer.fast_tokens(text, buf, |t| {
        if keep(t) {
            hashes.push(L::hash(t, seed));
        }
    }) {
        return;
    }
    hashes.truncate(mark);
    normalizer.normalize(text, norm);
    norm_tokens(norm, buf, |t| {
        if keep(t) {
            hashes.push(L::hash(t, seed));
        }
    });
}

/// The fingerprint of a text's "chars" features, chunk by chunk as `documents._long_text` does.
fn chars_text<L: Lanes, N: Normalizer>(
    cfg: &Config,
    text: &str,
    size: usize,
    normalizer: &mut N,
    scratch: &mut Scratch<L>,
) -> u128 {
    let (mut any, mut started, mut space) = (false, false, false);
    for piece in split_chunks(text, size) {
        let Scratch {
            norm,
            hashes,
            buf,
            chars,
            ..
        } = &mut *scratch;
        if piece.is_ascii() {
            norm.set_ascii(piece.as_bytes());
        } else {
            normalizer.normalize(piece, norm);
        }
        any = any || has_token(norm);
        let mut is_space = |cp: u32| -> bool {
            if cp < 0x80 {
                ascii_space(cp as u8)
            } else {
                normalizer.is_space(cp)
            }
        };
        collapse(&norm.cps, &mut is_space, chars);
        let first = norm.cps.first().is_some_and(|&cp| is_space(cp));
        let last = norm.cps.last().is_some_and(|&cp| is_space(cp));
        let lead = started && (space || first) && !chars.is_empty();
        space = last || (space && chars.is_empty());
        started = started || !chars.is_empty();
        if lead {
            hashes.push(L::hash(b" ", cfg.seed));
        }
        for &cp in chars.iter() {
            buf.clear();
            push_utf8(buf, cp);
            hashes.push(L::hash(buf, cfg.seed));
        }
    }
    if !any {
        return 0;
    }
    count(cfg, &scratch.hashes, &mut scratch.feats)
}

/// Whether a text's fingerprint can be made from the token hashes `minhash::token_ids` gives with
/// `seed` (`fingerprint_of_tokens`): the same tokens (no stopwords, one chunk, not "chars") hashed
/// alike (one 64-bit lane, the same seed).
pub fn shares_tokens(cfg: &Config, seed: u64, text: &str, chunk: usize) -> bool {
    cfg.kind != Kind::Chars
        && cfg.f <= 64
        && cfg.seed == seed
        && cfg.stop.is_empty()
        && text.len() <= chunk.max(1)
}

/// The fingerprint of a text from its token hashes, where `shares_tokens` holds: `fingerprint`'s.
pub fn fingerprint_of_tokens(cfg: &Config, hashes: &[u64]) -> u128 {
    count(cfg, hashes, &mut Vec::new())
}

/// The fingerprint of a document from its token hashes (`feats`: a buffer).
fn count<L: Lanes>(cfg: &Config, hashes: &[L], feats: &mut Vec<L>) -> u128 {
    let mut counter = Counter::new(cfg.f);
    if cfg.binary {
        feats.clear();
        for_each_feature(hashes, cfg.n, |h| feats.push(h));
        feats.sort_unstable();
        feats.dedup();
        for &h in feats.iter() {
            counter.add(h.bits());
        }
    } else {
        for_each_feature(hashes, cfg.n, |h| counter.add(h.bits()));
    }
    counter.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolver::{Answers, Resolver};
    use crate::testing;

    fn config(features: &str, n: usize, f: u32, binary: bool, seed: u64, stop: &[&str]) -> Config {
        let stop = stop.iter().map(|s| String::from(*s)).collect();
        Config::new(features, n, f, binary, seed, stop).unwrap()
    }

    /// The fingerprint of a job by the small table, checking that it needed nothing from Python.
    fn fp(cfg: &Config, job: &Job<'_>, chunk: usize) -> u128 {
        let state = testing::state();
        let answers = Answers::default();
        let mut resolver = Resolver::new(&state, &answers);
        let value = fingerprint(cfg, job, chunk, &mut resolver);
        assert!(resolver.take_needs().is_empty());
        value
    }

    fn text(t: &str) -> Job<'_> {
        Job::Text(Cow::Borrowed(t))
    }

    fn jobs() -> [Job<'static>; 4] {
        [
            text("Caf\u{e9} \u{4e2d}\u{6587} ok"),
            text("a  b\u{3000}c"),
            Job::Tokens(vec!["Caf\u{c9}".into(), "ok".into(), "x".into()]),
            Job::Weighted(vec![("a".into(), 2.0), ("b".into(), -1.5)]),
        ]
    }

    // The expected values are the pure engine's (`documents.fingerprint`) for the same documents.
    #[test]
    fn shingles_match_the_pure_engine() {
        let cfg = config("shingles", 3, 64, false, 0, &[]);
        assert_eq!(
            fp(&cfg, &text("Hello, World! hello world"), 1 << 20),
            0xf810140124204400
        );
        assert_eq!(
            fp(&cfg, &text("Caf\u{e9} \u{4e2d}\u{6587} ok"), 1 << 20),
            0x401049b02b018020
        );
        assert_eq!(
            fp(&cfg, &text("CAF\u{c9} \u{4e2d}\u{6587} OK"), 1 << 20),
            0x401049b02b018020
        );
        let stop = config("shingles", 3, 64, false, 0, &["ok"]);
        let expected = [
            0x40175bb03b878035,
            0xfd78f7d726b6fe0f,
            0x1b56b2da9f9b9964,
            0xe6c632b61e964e1f,
        ];
        for (job, want) in jobs().iter().zip(expected) {
            assert_eq!(fp(&stop, job, 1 << 20), want, "{job:?}");
        }
    }

    #[test]
    fn words_of_128_bits_binary_match_the_pure_engine() {
        let cfg = config("words", 3, 128, true, 7, &[]);
        assert_eq!(cfg.n, 1);
        let expected = [
            0x2445103686410401c03443a85600490,
            0xd48aecb4dc389309370d0a4345b41a90,
            0x10d76553646415c0384364bfe53200b2,
            0xceb2adbcec78c2499ed5888bc5a2a094,
        ];
        for (job, want) in jobs().iter().zip(expected) {
            assert_eq!(fp(&cfg, job, 1 << 20), want, "{job:?}");
        }
    }

    #[test]
    fn chars_of_32_bits_match_the_pure_engine() {
        let cfg = config("chars", 2, 32, false, 0, &[]);
        let [first, second, tokens, weighted] = jobs();
        // Caller-given tokens are joined by spaces for "chars" (as the boundary prepares them).
        let tokens = match tokens {
            Job::Tokens(tokens) => Job::Whole(Cow::Owned(tokens.join(" "))),
            other => other,
        };
        let expected = [0x5ebf0a39, 0x50827c29, 0x77bf1a21, 0x1e964e1f];
        for (job, want) in [first, second, tokens, weighted].iter().zip(expected) {
            assert_eq!(fp(&cfg, job, 1 << 20), want, "{job:?}");
        }
    }

    #[test]
    fn texts_without_tokens_are_zero_and_chunks_change_nothing() {
        for features in ["shingles", "words", "chars"] {
            let cfg = config(features, 2, 64, false, 0, &[]);
            assert_eq!(fp(&cfg, &text(""), 1 << 20), 0, "{features}");
            assert_eq!(fp(&cfg, &text(" ,;\u{3000}"), 1 << 20), 0, "{features}");
            let long = "The quick brown fox, jumps over the lazy dog. ".repeat(20);
            let whole = fp(&cfg, &text(&long), 1 << 20);
            assert_ne!(whole, 0);
            assert_eq!(fp(&cfg, &text(&long), 7), whole, "{features}");
        }
    }

    #[test]
    fn a_text_beyond_the_tables_is_noted_and_settles_with_the_answer() {
        let cfg = config("shingles", 1, 64, false, 0, &[]);
        let state = testing::state();
        let mut answers = Answers::default();
        let emoji = text("ok \u{1F600} go");
        let mut resolver = Resolver::new(&state, &answers);
        fingerprint(&cfg, &emoji, 1 << 20, &mut resolver);
        let needs = resolver.take_needs();
        assert_eq!(needs.texts, ["ok \u{1F600} go"]);
        // Python's answer: the emoji is a separator, so the tokens are "ok" and "go".
        let mut norm = Norm::default();
        norm.set_ascii(b"ok   go");
        norm.cps[3] = 0x1F600;
        answers.insert(String::from("ok \u{1F600} go"), norm);
        let mut resolver = Resolver::new(&state, &answers);
        let value = fingerprint(&cfg, &emoji, 1 << 20, &mut resolver);
        assert!(resolver.take_needs().is_empty());
        assert_eq!(value, fp(&cfg, &text("ok go"), 1 << 20));
    }

    #[test]
    fn bad_configurations_are_refused_with_the_schemes_messages() {
        let refused = |features: &str, n: usize, f: u32| {
            Config::new(features, n, f, false, 0, Vec::new())
                .err()
                .map(|err| err.to_string())
        };
        assert_eq!(
            refused("bytes", 3, 64).as_deref(),
            Some("features must be one of 'chars', 'shingles', 'words', got \"bytes\"")
        );
        assert_eq!(
            refused("words", 0, 64).as_deref(),
            Some("n must be between 1 and 16, got 0")
        );
        assert_eq!(
            refused("chars", 3, 48).as_deref(),
            Some("f must be one of (32, 64, 128), got 48")
        );
    }
}
