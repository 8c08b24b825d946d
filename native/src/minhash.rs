//! b-bit MinHash sketches, bit for bit as `simhash_redis.minhash.MinHasher` makes them.
//!
//! Tokens are the fingerprint's (normalised, CJK-aware; no stopwords, no chunks); a caller-given token
//! is itself tokenised and its tokens joined by single spaces (empty results dropped). Shingle hashes:
//! `acc = GOLDEN; acc = mix(acc * GOLDEN + xxh3_64(token_i, seed))` over the n tokens of each window
//! (one window of all tokens when there are fewer than n). The signature is, per permutation p,
//! `min(h * a[p] + b[p])` over the distinct shingle hashes (2^64-1 for none), and the sketch keeps the
//! top `bits` bits of `mix(min)`, as little-endian u8 or u16.

use std::borrow::Cow;

use crate::engine::{Normalizer, Stop};
use crate::hash::{mix, MIX_K};
use crate::tokenize::{ascii_tokens, norm_tokens};
use crate::unicode::Norm;
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Parameters of a `MinHasher`: n, seed, bits and the permutations.
#[derive(Debug)]
pub struct Sketcher {
    /// Tokens per shingle.
    pub n: usize,
    /// xxh3 seed of the token hashes.
    pub seed: u64,
    /// Bits kept per permutation: 8 or 16.
    pub bits: u32,
    /// Odd multipliers, one per permutation.
    pub a: Vec<u64>,
    /// Offsets, one per permutation.
    pub b: Vec<u64>,
}

/// A document for a sketch.
#[derive(Debug)]
pub enum MinJob<'a> {
    /// A text (surrogates already replaced).
    Text(Cow<'a, str>),
    /// Caller-given tokens.
    Tokens(Vec<Cow<'a, str>>),
}

/// Append to `out`, through `each`, the tokens of a text (the whole text, never cut into chunks); what
/// a failed one-pass attempt appended is taken back.
fn text_tokens<N: Normalizer, T>(
    text: &str,
    normalizer: &mut N,
    norm: &mut Norm,
    buf: &mut Vec<u8>,
    out: &mut Vec<T>,
    mut each: impl FnMut(&mut Vec<T>, &[u8]),
) -> Result<(), Stop> {
    if text.is_ascii() {
        ascii_tokens(text.as_bytes(), buf, |t| each(out, t));
        return Ok(());
    }
    let mark = out.len();
    if normalizer.fast_tokens(text, buf, |t| each(out, t))? {
        return Ok(());
    }
    out.truncate(mark);
    normalizer.normalize(text, norm)?;
    norm_tokens(norm, buf, |t| each(out, t));
    Ok(())
}

impl Sketcher {
    /// The sketch of one document.
    pub fn sketch<N: Normalizer>(
        &self,
        job: &MinJob<'_>,
        normalizer: &mut N,
    ) -> Result<Vec<u8>, Stop> {
        let mut ids = Vec::new();
        let mut norm = Norm::default();
        let mut buf = Vec::new();
        let seed = self.seed;
        match job {
            MinJob::Text(text) => {
                text_tokens(text, normalizer, &mut norm, &mut buf, &mut ids, |ids, t| {
                    ids.push(xxh3_64_with_seed(t, seed))
                })?;
            }
            MinJob::Tokens(tokens) => {
                let mut joined = Vec::new();
                for token in tokens {
                    joined.clear();
                    text_tokens(
                        token,
                        normalizer,
                        &mut norm,
                        &mut buf,
                        &mut joined,
                        |joined, t| {
                            if !joined.is_empty() {
                                joined.push(b' ');
                            }
                            joined.extend_from_slice(t);
                        },
                    )?;
                    if !joined.is_empty() {
                        ids.push(xxh3_64_with_seed(&joined, seed));
                    }
                }
            }
        }
        Ok(self.sketch_of_ids(&ids))
    }

    /// The sketch of a document given as its token hashes.
    pub fn sketch_of_ids(&self, ids: &[u64]) -> Vec<u8> {
        let mut shingles = shingle_hashes(ids, self.n);
        shingles.sort_unstable();
        shingles.dedup();
        let mut mins = vec![u64::MAX; self.a.len()];
        for &h in &shingles {
            for ((m, &a), &b) in mins.iter_mut().zip(&self.a).zip(&self.b) {
                let v = h.wrapping_mul(a).wrapping_add(b);
                if v < *m {
                    *m = v;
                }
            }
        }
        let shift = 64 - self.bits.clamp(8, 16);
        let mut out = Vec::with_capacity(mins.len() * 2);
        for &m in &mins {
            let top = mix(m) >> shift;
            if self.bits == 16 {
                out.extend_from_slice(&(top as u16).to_le_bytes());
            } else {
                out.push(top as u8);
            }
        }
        out
    }
}

/// The hashes of a token sequence's n-shingles (`minhash.shingle_hashes` before its `np.unique`).
pub fn shingle_hashes(ids: &[u64], n: usize) -> Vec<u64> {
    if ids.is_empty() {
        return Vec::new();
    }
    let width = n.clamp(1, ids.len());
    ids.windows(width)
        .map(|w| {
            w.iter().fold(MIX_K, |acc, &id| {
                mix(acc.wrapping_mul(MIX_K).wrapping_add(id))
            })
        })
        .collect()
}

/// `MinHasher.estimate` of two sketches of the same parameters: the agreement, corrected for chance
/// agreements and clipped to [0, 1].
pub fn estimate(a: &[u8], b: &[u8], bits: u32) -> f64 {
    let width = if bits == 16 { 2 } else { 1 };
    let total = a.len() / width;
    if total == 0 {
        return 0.0;
    }
    let agree = a
        .chunks_exact(width)
        .zip(b.chunks_exact(width))
        .filter(|(x, y)| x == y)
        .count();
    let chance = 2f64.powi(-(bits as i32));
    let value = (agree as f64 / total as f64 - chance) / (1.0 - chance);
    value.clamp(0.0, 1.0)
}
