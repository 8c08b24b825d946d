//! The fingerprint engine: documents to fingerprints for one scheme, bit for bit as
//! `simhash_redis.fingerprint` computes them.
//!
//! Texts are cut by `split_chunks` (the pure engine does so past `CHUNK_CHARS`; below that the one
//! chunk is the whole text). Each chunk is normalised (ASCII here, other text through a `Normalizer`)
//! and tokenised, the tokens' hashes concatenated; the features are every window of n token hashes
//! (one feature of all tokens when there are fewer than n), counted per bit (tf) or once per distinct
//! hash (binary). "chars" features hash the characters of the whitespace-collapsed normalised text,
//! and a text without a single token has the fingerprint 0.

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::HashSet;

use pyo3::PyErr;

use crate::hash::{for_each_feature, Lanes, Wide};
use crate::sums::{Counter, FloatSums};
use crate::tokenize::{ascii_tokens, collapse, has_token, norm_tokens, push_utf8, split_chunks};
use crate::unicode::{ascii_space, Norm};

/// Why a computation stopped before its end.
#[derive(Debug)]
pub enum Stop {
    /// The text needs Python (normalisation beyond the tables); try again attached to Python.
    NeedPython,
    /// A Python call failed.
    Error(PyErr),
}

/// Normalises non-ASCII text and answers whitespace questions about normalised code points.
pub trait Normalizer {
    /// `features.normalize(text)` as code points and classes; the text is free of surrogates.
    fn normalize(&mut self, text: &str, out: &mut Norm) -> Result<(), Stop>;
    /// `chr(cp).isspace()` for a code point of a normalised text.
    fn is_space(&mut self, cp: u32) -> Result<bool, Stop>;
    /// Tokenise a non-ASCII text in one pass when the tables alone normalise it: true when done,
    /// false when the text needs `normalize` (the tokens given to `sink` must then be discarded).
    fn fast_tokens(
        &mut self,
        text: &str,
        buf: &mut Vec<u8>,
        sink: impl FnMut(&[u8]),
    ) -> Result<bool, Stop>;
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

/// Run with this thread's buffers, taken out for the call (so a call that comes back through a Python
/// callback simply gets empty ones) and put back after.
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
) -> Result<u128, Stop> {
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

/// Fingerprint documents in order, each a `Result`, reusing buffers.
pub fn fingerprint_all<N: Normalizer>(
    cfg: &Config,
    jobs: &[Job<'_>],
    chunk: usize,
    normalizer: &mut N,
) -> Vec<Result<u128, Stop>> {
    if cfg.f == 128 {
        let mut scratch = Scratch::<Wide>::default();
        jobs.iter()
            .map(|job| run(cfg, job, chunk, normalizer, &mut scratch))
            .collect()
    } else {
        let mut scratch = Scratch::<u64>::default();
        jobs.iter()
            .map(|job| run(cfg, job, chunk, normalizer, &mut scratch))
            .collect()
    }
}

fn run<L: Lanes, N: Normalizer>(
    cfg: &Config,
    job: &Job<'_>,
    chunk: usize,
    normalizer: &mut N,
    scratch: &mut Scratch<L>,
) -> Result<u128, Stop> {
    scratch.hashes.clear();
    match job {
        Job::Weighted(items) => {
            let mut sums = FloatSums::new(cfg.f);
            for (name, weight) in items {
                sums.add(L::hash(name.as_bytes(), cfg.seed).bits(), *weight);
            }
            Ok(sums.finish())
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
                text_tokens(cfg, piece, normalizer, scratch)?;
            }
            Ok(count(cfg, scratch))
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
                    normalizer.normalize(token, norm)?;
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
            Ok(count(cfg, scratch))
        }
    }
}

/// Append the hashes of a raw text's tokens, stopwords dropped.
fn text_tokens<L: Lanes, N: Normalizer>(
    cfg: &Config,
    text: &str,
    normalizer: &mut N,
    scratch: &mut Scratch<L>,
) -> Result<(), Stop> {
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
        return Ok(());
    }
    let mark = hashes.len();
    let keep = |t: &[u8]| stop.is_empty() || !stop.contains(t);
    if normalizer.fast_tokens(text, buf, |t| {
        if keep(t) {
            hashes.push(L::hash(t, seed));
        }
    })? {
        return Ok(());
    }
    hashes.truncate(mark);
    normalizer.normalize(text, norm)?;
    norm_tokens(norm, buf, |t| {
        if keep(t) {
            hashes.push(L::hash(t, seed));
        }
    });
    Ok(())
}

/// The fingerprint of a text's "chars" features, chunk by chunk as `fingerprint._long_text` does.
fn chars_text<L: Lanes, N: Normalizer>(
    cfg: &Config,
    text: &str,
    size: usize,
    normalizer: &mut N,
    scratch: &mut Scratch<L>,
) -> Result<u128, Stop> {
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
            normalizer.normalize(piece, norm)?;
        }
        any = any || has_token(norm);
        let mut failed = None;
        let mut is_space = |cp: u32| -> bool {
            if cp < 0x80 {
                return ascii_space(cp as u8);
            }
            match normalizer.is_space(cp) {
                Ok(s) => s,
                Err(stop) => {
                    failed.get_or_insert(stop);
                    false
                }
            }
        };
        collapse(&norm.cps, &mut is_space, chars);
        let first = norm.cps.first().is_some_and(|&cp| is_space(cp));
        let last = norm.cps.last().is_some_and(|&cp| is_space(cp));
        if let Some(stop) = failed {
            return Err(stop);
        }
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
        return Ok(0);
    }
    Ok(count(cfg, scratch))
}

/// The fingerprint of a document from its token hashes.
fn count<L: Lanes>(cfg: &Config, scratch: &mut Scratch<L>) -> u128 {
    let mut counter = Counter::new(cfg.f);
    if cfg.binary {
        let feats = &mut scratch.feats;
        feats.clear();
        for_each_feature(&scratch.hashes, cfg.n, |h| feats.push(h));
        feats.sort_unstable();
        feats.dedup();
        for &h in feats.iter() {
            counter.add(h.bits());
        }
    } else {
        for_each_feature(&scratch.hashes, cfg.n, |h| counter.add(h.bits()));
    }
    counter.finish()
}
