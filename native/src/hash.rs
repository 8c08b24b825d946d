//! Token hashes (xxh3 with the scheme's seed) and the shingle combiner of the fingerprint scheme.
//!
//! A token hash has one 64-bit lane (f = 32 or 64: `XXH3_64bits_withSeed`) or two (f = 128:
//! `XXH3_128bits_withSeed`, low64 = lane 0, high64 = lane 1). A feature of tokens u0..um-1 is, per lane,
//! `h = T(u0); h = mix(h * K + T(ui))` for i = 1..m-1, all arithmetic mod 2^64 (docs/fingerprints.md).

use xxhash_rust::xxh3::{xxh3_128_with_seed, xxh3_64_with_seed};

/// Multiplier of the shingle combiner (2^64 / golden ratio): `hashing.MIX_K`.
pub const MIX_K: u64 = 0x9E37_79B9_7F4A_7C15;
/// First multiplier of the splitmix64 finaliser: `hashing.MIX_C1`.
pub const MIX_C1: u64 = 0xBF58_476D_1CE4_E5B9;
/// Second multiplier of the splitmix64 finaliser: `hashing.MIX_C2`.
pub const MIX_C2: u64 = 0x94D0_49BB_1331_11EB;

/// The splitmix64 finaliser.
#[inline(always)]
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(MIX_C1);
    z = (z ^ (z >> 27)).wrapping_mul(MIX_C2);
    z ^ (z >> 31)
}

/// The hash lanes of a token or feature: `u64` for f = 32 and 64, `Wide` for f = 128.
pub trait Lanes: Copy + Ord + Send + Sync + 'static {
    /// The token hash of some UTF-8 bytes.
    fn hash(bytes: &[u8], seed: u64) -> Self;
    /// One step of the combiner: `mix(self * K + next)` per lane.
    fn combine(self, next: Self) -> Self;
    /// The feature's bits: lane 0 as bits 0-63, lane 1 (if any) as bits 64-127.
    fn bits(self) -> u128;
}

impl Lanes for u64 {
    #[inline(always)]
    fn hash(bytes: &[u8], seed: u64) -> Self {
        xxh3_64_with_seed(bytes, seed)
    }

    #[inline(always)]
    fn combine(self, next: Self) -> Self {
        mix(self.wrapping_mul(MIX_K).wrapping_add(next))
    }

    #[inline(always)]
    fn bits(self) -> u128 {
        u128::from(self)
    }
}

/// Two 64-bit lanes (f = 128): lane 0 is xxh3-128's low64, lane 1 its high64.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Wide(pub u64, pub u64);

impl Lanes for Wide {
    #[inline(always)]
    fn hash(bytes: &[u8], seed: u64) -> Self {
        let h = xxh3_128_with_seed(bytes, seed);
        Wide(h as u64, (h >> 64) as u64)
    }

    #[inline(always)]
    fn combine(self, next: Self) -> Self {
        Wide(self.0.combine(next.0), self.1.combine(next.1))
    }

    #[inline(always)]
    fn bits(self) -> u128 {
        u128::from(self.0) | (u128::from(self.1) << 64)
    }
}

/// The hash of one feature made of consecutive token hashes (at least one).
#[inline(always)]
pub fn combine_all<L: Lanes>(first: L, rest: &[L]) -> L {
    rest.iter().fold(first, |h, &t| h.combine(t))
}

/// Call `sink` with the hash of every feature of a token sequence under shingle size `n`.
///
/// The features are the windows of n tokens; a sequence of 1 to n-1 tokens is one feature of all of
/// them; an empty one has none.
pub fn for_each_feature<L: Lanes>(tokens: &[L], n: usize, mut sink: impl FnMut(L)) {
    let n = n.max(1);
    match tokens.split_first() {
        None => {}
        Some((&first, rest)) if tokens.len() < n => sink(combine_all(first, rest)),
        Some(_) => {
            for window in tokens.windows(n) {
                if let Some((&first, rest)) = window.split_first() {
                    sink(combine_all(first, rest));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xxh3_vectors() {
        // docs/fingerprints.md, worked example.
        assert_eq!(u64::hash(b"hello", 0), 0x9555_e855_5c62_dcfd);
        assert_eq!(u64::hash(b"world", 0), 0xd647_6c25_083d_69be);
        // xxhash.xxh3_64_intdigest(b"", 0) and xxh3_128 low/high of b"" (the reference vectors).
        assert_eq!(u64::hash(b"", 0), 0x2d06_8005_38d3_94c2);
        let wide = Wide::hash(b"", 0);
        assert_eq!(wide.bits(), 0x99aa_06d3_0147_98d8_6001_c324_468d_497f);
    }

    #[test]
    fn worked_example() {
        let h = u64::hash(b"hello", 0).combine(u64::hash(b"world", 0));
        assert_eq!(h, 0xf1e3_ffa9_2aa5_1ad1);
    }

    #[test]
    fn features_of_short_and_long() {
        let t: Vec<u64> = (1..=5).collect();
        let mut got = Vec::new();
        for_each_feature(&t, 3, |h| got.push(h));
        assert_eq!(got.len(), 3);
        assert_eq!(got[0], 1u64.combine(2).combine(3));
        got.clear();
        for_each_feature(&t[..2], 3, |h| got.push(h));
        assert_eq!(got, vec![1u64.combine(2)]);
        got.clear();
        for_each_feature(&t[..0], 3, |h| got.push(h));
        assert!(got.is_empty());
        for_each_feature(&t, 1, |h| got.push(h));
        assert_eq!(got, t);
    }
}
