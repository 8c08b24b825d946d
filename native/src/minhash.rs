//! b-bit MinHash sketches, bit for bit as `simhash_redis.fingerprinting.minhash.MinHasher` makes them.
//!
//! Tokens are the fingerprint's (normalised, CJK-aware; no stopwords, no chunks); a caller-given token
//! is itself tokenised and its tokens joined by single spaces (empty results dropped). Shingle hashes:
//! `acc = GOLDEN; acc = mix(acc * GOLDEN + xxh3_64(token_i, seed))` over the n tokens of each window
//! (one window of all tokens when there are fewer than n). The signature is, per permutation p,
//! `min(h * a[p] + b[p])` over the distinct shingle hashes (2^64-1 for none), and the sketch keeps the
//! top `bits` bits of `mix(min)`, as little-endian u8 or u16.

use std::borrow::Cow;

use crate::engine::Normalizer;
use crate::error::{value, Error};
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

impl Sketcher {
    /// The sketcher of `MinHasher(num_perm, bits, n, seed)`, given its permutations `a` and `b` as
    /// little-endian uint64 bytes.
    ///
    /// # Errors
    /// `Error::Value` for a parameter out of range, or permutations of the wrong size.
    pub fn new(
        num_perm: usize,
        bits: u32,
        n: usize,
        seed: u64,
        a: &[u8],
        b: &[u8],
    ) -> Result<Sketcher, Error> {
        if !(16..=4096).contains(&num_perm) {
            return Err(value(format!(
                "num_perm must be in 16..4096, got {num_perm}"
            )));
        }
        if bits != 8 && bits != 16 {
            return Err(value(format!("bits must be one of (8, 16), got {bits}")));
        }
        if !(1..=16).contains(&n) {
            return Err(value(format!("n must be in 1..16, got {n}")));
        }
        Ok(Sketcher {
            n,
            seed,
            bits,
            a: le_words(a, num_perm, "a")?,
            b: le_words(b, num_perm, "b")?,
        })
    }

    /// The size of each sketch in bytes.
    pub fn sketch_bytes(&self) -> usize {
        self.a.len() * self.bits as usize / 8
    }
}

/// Permutations whose minima `Sketcher::sketch_of_shingles` keeps in registers at once.
const LANES: usize = 4;

/// A block of `LANES` words as an array (the blocks are exactly that long).
fn lanes(block: &[u64]) -> [u64; LANES] {
    let mut out = [0u64; LANES];
    out.copy_from_slice(block);
    out
}

/// `count` little-endian uint64 from their bytes; `name` is used in the message.
fn le_words(data: &[u8], count: usize, name: &str) -> Result<Vec<u64>, Error> {
    if data.len() != 8 * count {
        return Err(value(format!(
            "{name} must hold {count} little-endian uint64, got {} bytes",
            data.len()
        )));
    }
    Ok(data
        .chunks_exact(8)
        .map(|c| {
            let mut word = [0u8; 8];
            word.copy_from_slice(c);
            u64::from_le_bytes(word)
        })
        .collect())
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
) {
    if text.is_ascii() {
        ascii_tokens(text.as_bytes(), buf, |t| each(out, t));
        return;
    }
    let mark = out.len();
    if normalizer.fast_tokens(text, buf, |t| each(out, t)) {
        return;
    }
    out.truncate(mark);
    normalizer.normalize(text, norm);
    norm_tokens(norm, buf, |t| each(out, t));
}

/// The token hashes (xxh3 with `seed`) of a document, as `minhash.doc_tokens` makes its tokens.
pub fn token_ids<N: Normalizer>(job: &MinJob<'_>, normalizer: &mut N, seed: u64) -> Vec<u64> {
    let mut ids = Vec::new();
    let mut norm = Norm::default();
    let mut buf = Vec::new();
    match job {
        MinJob::Text(text) => {
            text_tokens(text, normalizer, &mut norm, &mut buf, &mut ids, |ids, t| {
                ids.push(xxh3_64_with_seed(t, seed))
            });
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
                );
                if !joined.is_empty() {
                    ids.push(xxh3_64_with_seed(&joined, seed));
                }
            }
        }
    }
    ids
}

/// The distinct hashes of a token sequence's n-shingles (`minhash.shingle_hashes`, then its
/// `np.unique`), in no set order: every use of them (minima, parities, counts) is blind to order.
pub fn distinct_shingles(ids: &[u64], n: usize) -> Vec<u64> {
    distinct(shingle_hashes(ids, n))
}

/// Slots probed per value, on average, before `distinct` gives up its table for a sort: hashes
/// crafted to share their top bits cannot make it quadratic.
const PROBES: usize = 8;

/// The distinct values of `values`, first seen first, through an open-addressing table indexed by
/// the values' top bits (they are hashes, spread already); sorted instead past `PROBES`.
fn distinct(mut values: Vec<u64>) -> Vec<u64> {
    if values.len() < 2 {
        return values;
    }
    let bits = (values.len() * 2).next_power_of_two().trailing_zeros();
    let (mask, shift) = ((1usize << bits) - 1, 64 - bits);
    // 0 marks an empty slot: the value 0 is noted apart.
    let mut table = vec![0u64; 1 << bits];
    let (mut zero, mut kept, mut budget) = (false, 0, PROBES * values.len());
    for i in 0..values.len() {
        let value = values[i];
        let fresh = if value == 0 {
            !std::mem::replace(&mut zero, true)
        } else {
            let mut at = (value >> shift) as usize;
            loop {
                let slot = &mut table[at];
                if *slot == 0 {
                    *slot = value;
                    break true;
                }
                if *slot == value {
                    break false;
                }
                at = (at + 1) & mask;
                budget = budget.saturating_sub(1);
                if budget == 0 {
                    values.sort_unstable();
                    values.dedup();
                    return values;
                }
            }
        };
        if fresh {
            values[kept] = value;
            kept += 1;
        }
    }
    values.truncate(kept);
    values
}

impl Sketcher {
    /// The sketch of one document.
    pub fn sketch<N: Normalizer>(&self, job: &MinJob<'_>, normalizer: &mut N) -> Vec<u8> {
        self.sketch_of_ids(&token_ids(job, normalizer, self.seed))
    }

    /// The sketch of a document given as its token hashes.
    pub fn sketch_of_ids(&self, ids: &[u64]) -> Vec<u8> {
        self.sketch_of_shingles(&distinct_shingles(ids, self.n))
    }

    /// The sketch of a document given as its distinct shingle hashes (`distinct_shingles`).
    pub fn sketch_of_shingles(&self, shingles: &[u64]) -> Vec<u8> {
        let mut mins = vec![u64::MAX; self.a.len()];
        // Four permutations at a time over all the shingles: their minima, multipliers and offsets
        // stay in registers (a minimum's order of visits does not change it).
        let mut blocks = mins.chunks_exact_mut(LANES);
        let mut a_blocks = self.a.chunks_exact(LANES);
        let mut b_blocks = self.b.chunks_exact(LANES);
        for ((m, a), b) in (&mut blocks).zip(&mut a_blocks).zip(&mut b_blocks) {
            let mut low = [u64::MAX; LANES];
            let (a, b): ([u64; LANES], [u64; LANES]) = (lanes(a), lanes(b));
            for &h in shingles {
                for j in 0..LANES {
                    low[j] = low[j].min(h.wrapping_mul(a[j]).wrapping_add(b[j]));
                }
            }
            m.copy_from_slice(&low);
        }
        let rest = blocks.into_remainder();
        for ((m, &a), &b) in rest
            .iter_mut()
            .zip(a_blocks.remainder())
            .zip(b_blocks.remainder())
        {
            for &h in shingles {
                *m = (*m).min(h.wrapping_mul(a).wrapping_add(b));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolver::{Answers, Resolver};
    use crate::testing;

    fn bytes(words: &[u64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    const A8: [u64; 16] = [
        0xa30febcfd9c2825f,
        0x4510bdf882d9d721,
        0xa7d3da94ecde8b9,
        0x43b27b61342f01d,
        0xd0327a782cde513b,
        0xe9aa5979a6401c4f,
        0x9b4c7b7180edb27f,
        0xbac0495ff8829a45,
        0x8b2b01e7a1dc7fbf,
        0xef60e8078f56bfed,
        0xd0dbc74d4700374d,
        0xb37868abbe90b1,
        0xdb7ed8bf64e6f5f1,
        0x89910738de7951f,
        0xbacab307c3cfd379,
        0x2cf7c449d8b927a7,
    ];
    const B8: [u64; 16] = [
        0x6e7ca59d0b6dbf87,
        0x454e99ec82d43c97,
        0x265cf5900a4a891c,
        0x361a9d67bd936b78,
        0x39ffa9eb39d5186,
        0xfe883b000af6534,
        0x55d70554810f75d4,
        0x52d71b1d4347715d,
        0x4ec4f07820ef3318,
        0x311c5899e1cc8d32,
        0x7fa4933ebaff7a8d,
        0x7d8c032b6709e29f,
        0x57bfd6f9b0943896,
        0x53423fe3799ce31f,
        0x581f05c06b8f52de,
        0x31c82d5e5a1cb4d7,
    ];
    const A16: [u64; 16] = [
        0x15ed1a93cfbec2f9,
        0x3c9f9d052defd3f5,
        0xcd2052c72e6dec37,
        0x95089239de860725,
        0x1818d0900a160f0f,
        0x6ee1683b550b2907,
        0x7aa31b1a9f08c9e3,
        0x28e4a64643c92921,
        0xbc0d3f89b100b333,
        0x1d199c08085e40ff,
        0x642787db73be929d,
        0x844915a8e3487fed,
        0x6e3da3506b8c9911,
        0x96386e61aa94e52f,
        0xbce2efee2c3ec14b,
        0xf4cdee49c1b9cd0f,
    ];
    const B16: [u64; 16] = [
        0x2460b427e4a23750,
        0x5303984a28f562ac,
        0x591d9b14533f144a,
        0x2577df9def43cc86,
        0x30d3b9f8294d60,
        0x7c9a58a609d8695c,
        0x263202e2f8d12f36,
        0x2830b17d11d37b99,
        0x7223969e858460b3,
        0x4ae69e84d4d22d0e,
        0x3c53e0071f518973,
        0x62fabdb5985d28b9,
        0x3e260c33cbbbd9a,
        0x5a7dd50ea090ab3f,
        0x2fe738d0c2859b93,
        0xba10fcca07770af,
    ];

    fn hex(data: &[u8]) -> String {
        data.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn sketch(sketcher: &Sketcher, job: &MinJob<'_>) -> String {
        let state = testing::state();
        let answers = Answers::default();
        let mut resolver = Resolver::new(&state, &answers);
        let out = sketcher.sketch(job, &mut resolver);
        assert!(resolver.take_needs().is_empty());
        assert_eq!(out.len(), sketcher.sketch_bytes());
        hex(&out)
    }

    // The expected sketches are `MinHasher(num_perm=16, ...)`'s, whose permutations are A and B.
    #[test]
    fn sketches_match_the_pure_minhasher() {
        let eight = Sketcher::new(16, 8, 2, 0, &bytes(&A8), &bytes(&B8)).unwrap();
        let text = MinJob::Text(Cow::Borrowed("Caf\u{e9} \u{4e2d}\u{6587} ok hello"));
        assert_eq!(sketch(&eight, &text), "d5535dca15abfcfd0cc3334642361eb1");
        let tokens = MinJob::Tokens(vec!["Hello World".into(), "ok".into()]);
        assert_eq!(sketch(&eight, &tokens), "a78e74354505d1a5d2e16555081e285d");
        let sixteen = Sketcher::new(16, 16, 1, 3, &bytes(&A16), &bytes(&B16)).unwrap();
        let text = MinJob::Text(Cow::Borrowed("one two three"));
        assert_eq!(
            sketch(&sixteen, &text),
            "9da09274f86483363348c9e8247f35686ee09742d49ca736b253b139606f5ffb"
        );
    }

    #[test]
    fn distinct_values_are_kept_once_even_when_they_crowd_the_table() {
        let sorted = |mut v: Vec<u64>| {
            v.sort_unstable();
            v
        };
        let spread: Vec<u64> = (0..5000u64).map(|i| mix(i % 1700)).collect();
        let mut want = spread.clone();
        want.sort_unstable();
        want.dedup();
        assert_eq!(sorted(distinct(spread)), want);
        assert_eq!(distinct(vec![0, 5, 0, 5, 7]), vec![0, 5, 7]);
        assert_eq!(distinct(vec![3]), vec![3]);
        // Values that all share their top bits: the table gives way to the sort.
        let crowded: Vec<u64> = (0..3000u64).map(|i| (i % 2000) + 1).collect();
        assert_eq!(distinct(crowded), (1..=2000).collect::<Vec<u64>>());
    }

    #[test]
    fn shingles_and_the_empty_sketch() {
        assert!(shingle_hashes(&[], 3).is_empty());
        assert_eq!(shingle_hashes(&[1, 2], 3).len(), 1);
        assert_eq!(shingle_hashes(&[1, 2, 3, 4], 3).len(), 2);
        let eight = Sketcher::new(16, 8, 2, 0, &bytes(&A8), &bytes(&B8)).unwrap();
        let empty = eight.sketch_of_ids(&[]);
        let top = (mix(u64::MAX) >> 56) as u8;
        assert_eq!(empty, vec![top; 16]);
    }

    #[test]
    fn estimates_are_corrected_for_chance_and_clipped() {
        assert_eq!(estimate(&[1, 2, 3, 4], &[1, 2, 3, 4], 8), 1.0);
        assert_eq!(estimate(&[1, 2, 3, 4], &[5, 6, 7, 8], 8), 0.0);
        let half = estimate(&[1, 2, 3, 4], &[1, 2, 7, 8], 8);
        assert!((half - (0.5 - 1.0 / 256.0) / (1.0 - 1.0 / 256.0)).abs() < 1e-12);
        assert_eq!(
            estimate(&[1, 0, 2, 0], &[1, 0, 3, 0], 16),
            (0.5 - 1.0 / 65536.0) / (1.0 - 1.0 / 65536.0)
        );
        assert_eq!(estimate(&[], &[], 8), 0.0);
    }

    #[test]
    fn bad_parameters_are_refused() {
        let message = |result: Result<Sketcher, Error>| result.err().map(|e| e.to_string());
        let (a, b) = (bytes(&A8), bytes(&B8));
        assert_eq!(
            message(Sketcher::new(8, 8, 2, 0, &a, &b)).as_deref(),
            Some("num_perm must be in 16..4096, got 8")
        );
        assert_eq!(
            message(Sketcher::new(16, 4, 2, 0, &a, &b)).as_deref(),
            Some("bits must be one of (8, 16), got 4")
        );
        assert_eq!(
            message(Sketcher::new(16, 8, 0, 0, &a, &b)).as_deref(),
            Some("n must be in 1..16, got 0")
        );
        assert_eq!(
            message(Sketcher::new(16, 8, 2, 0, &a[1..], &b)).as_deref(),
            Some("a must hold 16 little-endian uint64, got 127 bytes")
        );
    }
}
