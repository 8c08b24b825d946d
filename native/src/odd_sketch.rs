//! Odd sketches, byte for byte as `simhash_redis.fingerprinting.odd_sketch.OddSketcher` makes them.
//!
//! A document's distinct shingle hashes are the MinHasher's (`minhash::token_ids`, then
//! `minhash::distinct_shingles`). For a shingle hash h and the seed s, all arithmetic mod 2^64:
//! its bit is `mix(h ^ 0x2545F4914F6CDD1D * (s + 1)) % 1008`; its sampling key
//! `mix(h ^ 0x9E3779B97F4A7C15 * (s + 3))`, kept at level L when the key has at least L leading zero
//! bits (key < 2^(64 - L)). A document's own level is the smallest (at most 15) that keeps at most
//! 1,024 shingles. The 128 bytes: the 1,008 parity bits, bit i in byte i / 8 under 0x80 >> (i % 8),
//! then a little-endian u16 of the number of shingles kept (at most 4,095) | level << 12.

use crate::engine::Normalizer;
use crate::error::{value, Error};
use crate::hash::mix;
use crate::minhash::{distinct_shingles, token_ids, MinJob, Sketcher};

/// Parity bits of a sketch.
pub const BITS: usize = 1008;
/// Bytes of a sketch.
pub const BYTES: usize = 128;
/// The most shingles a document's own level keeps.
const LIMIT: usize = 1024;
/// The largest level (4 bits).
const MAX_LEVEL: u32 = 15;
/// The largest size a sketch records (12 bits).
const MAX_SIZE: usize = 4095;
const PARITY_BYTES: usize = BITS / 8;
const SLOT_SALT: u64 = 0x2545_F491_4F6C_DD1D;
const SAMPLE_SALT: u64 = 0x9E37_79B9_7F4A_7C15;

/// A sampling level, 0..=15.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Level(u32);

impl Level {
    /// The level `value`; `name` is used in the message.
    ///
    /// # Errors
    /// `Error::Value` when it is out of 0..=15.
    pub fn new(given: i64, name: &str) -> Result<Level, Error> {
        match u32::try_from(given) {
            Ok(level) if level <= MAX_LEVEL => Ok(Level(level)),
            _ => Err(value(format!(
                "{name} must be in 0..{MAX_LEVEL}, got {given}"
            ))),
        }
    }
}

/// The parameters of an `OddSketcher`: n and the seed.
#[derive(Debug)]
pub struct OddSketcher {
    /// Tokens per shingle.
    pub n: usize,
    /// xxh3 seed of the token hashes, and of the salts.
    pub seed: u64,
    slot_salt: u64,
    sample_salt: u64,
}

impl OddSketcher {
    /// The sketcher of `OddSketcher(n, seed)`.
    ///
    /// # Errors
    /// `Error::Value` when n is out of 1..=16.
    pub fn new(n: usize, seed: u64) -> Result<OddSketcher, Error> {
        if !(1..=16).contains(&n) {
            return Err(value(format!("n must be in 1..16, got {n}")));
        }
        Ok(OddSketcher {
            n,
            seed,
            slot_salt: SLOT_SALT.wrapping_mul(seed.wrapping_add(1)),
            sample_salt: SAMPLE_SALT.wrapping_mul(seed.wrapping_add(3)),
        })
    }

    /// A document's distinct shingle hashes (`minhash::distinct_shingles`).
    pub fn shingles<N: Normalizer>(&self, job: &MinJob<'_>, normalizer: &mut N) -> Vec<u64> {
        distinct_shingles(&token_ids(job, normalizer, self.seed), self.n)
    }

    /// The sketch of one document at `level` (None: its own).
    pub fn sketch<N: Normalizer>(
        &self,
        job: &MinJob<'_>,
        level: Option<Level>,
        normalizer: &mut N,
    ) -> Vec<u8> {
        self.sketch_of_shingles(&self.shingles(job, normalizer), level)
    }

    /// The sketches of one document at each of `levels`.
    pub fn sketch_levels<N: Normalizer>(
        &self,
        job: &MinJob<'_>,
        levels: &[Level],
        normalizer: &mut N,
    ) -> Vec<Vec<u8>> {
        let shingles = self.shingles(job, normalizer);
        levels
            .iter()
            .map(|&level| self.sketch_of_shingles(&shingles, Some(level)))
            .collect()
    }

    /// Whether a MinHash sketcher can key `banded_query`: of this sketcher's n and seed.
    ///
    /// # Errors
    /// `Error::Value` when `bands` has another n or seed.
    pub fn banded_check(&self, bands: &Sketcher) -> Result<(), Error> {
        if bands.n != self.n || bands.seed != self.seed {
            return Err(value(format!(
                "the band MinHash (n={}, seed={}) must share the odd sketch's n={} and seed={}",
                bands.n, bands.seed, self.n, self.seed
            )));
        }
        Ok(())
    }

    /// A document's query sketch for `BandedOddSketcher`, its shingles made once: the band values
    /// (`bands`' sketch; `banded_check` it first), then the odd sketch at the document's own level,
    /// at the level below (zeros at level 0), and at the level above (zeros unless the own level
    /// keeps at least `above` shingles and is below the last).
    pub fn banded_query<N: Normalizer>(
        &self,
        bands: &Sketcher,
        job: &MinJob<'_>,
        above: usize,
        normalizer: &mut N,
    ) -> Vec<u8> {
        let shingles = self.shingles(job, normalizer);
        let mut out = self.stored_of_shingles(bands, &shingles);
        let (size, level) = header(&out[out.len() - BYTES..]);
        if level > 0 {
            out.extend(self.sketch_of_shingles(&shingles, Some(Level(level - 1))));
        } else {
            out.extend_from_slice(&[0u8; BYTES]);
        }
        if size >= above && level < MAX_LEVEL {
            out.extend(self.sketch_of_shingles(&shingles, Some(Level(level + 1))));
        } else {
            out.extend_from_slice(&[0u8; BYTES]);
        }
        out
    }

    /// A document's stored sketch for `BandedOddSketcher`, its shingles made once: the band values
    /// (`bands`' sketch; `banded_check` it first), then the odd sketch at the document's own level;
    /// the first bytes of its `banded_query`, without the levels only a query needs.
    pub fn banded_stored<N: Normalizer>(
        &self,
        bands: &Sketcher,
        job: &MinJob<'_>,
        normalizer: &mut N,
    ) -> Vec<u8> {
        self.stored_of_shingles(bands, &self.shingles(job, normalizer))
    }

    /// `banded_stored` of a document given as its distinct shingle hashes (`distinct_shingles`).
    pub fn stored_of_shingles(&self, bands: &Sketcher, shingles: &[u64]) -> Vec<u8> {
        let mut out = bands.sketch_of_shingles(shingles);
        out.extend(self.sketch_of_shingles(shingles, None));
        out
    }

    /// How deep a shingle's sampling key reaches: its leading zero bits, at most 15.
    fn depth(&self, h: u64) -> u32 {
        mix(h ^ self.sample_salt).leading_zeros().min(MAX_LEVEL)
    }

    /// The sketch of a set given as its distinct shingle hashes, at `level` (None: the set's own).
    pub fn sketch_of_shingles(&self, shingles: &[u64], level: Option<Level>) -> Vec<u8> {
        let level = level.map_or_else(|| self.own_level(shingles), |Level(l)| l);
        let mut out = vec![0u8; BYTES];
        let mut kept = 0usize;
        for &h in shingles {
            if level > 0 && self.depth(h) < level {
                continue;
            }
            kept += 1;
            // Below 1,008: the index is in bounds.
            let slot = (mix(h ^ self.slot_salt) % BITS as u64) as usize;
            if let Some(byte) = out.get_mut(slot / 8) {
                *byte ^= 0x80 >> (slot % 8);
            }
        }
        let header = (kept.min(MAX_SIZE) as u16) | ((level as u16) << 12);
        out[PARITY_BYTES..].copy_from_slice(&header.to_le_bytes());
        out
    }

    /// The smallest level that keeps at most 1,024 of the shingles (15 at most).
    fn own_level(&self, shingles: &[u64]) -> u32 {
        if shingles.len() <= LIMIT {
            return 0;
        }
        let mut at_depth = [0usize; MAX_LEVEL as usize + 1];
        for &h in shingles {
            at_depth[self.depth(h) as usize] += 1;
        }
        let mut kept = 0usize;
        let mut level = MAX_LEVEL;
        // From the deepest level up: the keys kept at level L are those at depth L or more.
        for l in (0..=MAX_LEVEL).rev() {
            kept += at_depth[l as usize];
            if kept > LIMIT {
                break;
            }
            level = l;
        }
        level
    }
}

/// The size and level of a sketch of `BYTES` bytes.
fn header(sketch: &[u8]) -> (usize, u32) {
    let word = sketch
        .get(PARITY_BYTES..BYTES)
        .map_or(0, |tail| u16::from_le_bytes([tail[0], tail[1]]));
    (usize::from(word) & MAX_SIZE, u32::from(word >> 12))
}

/// The symmetric difference estimated from `z` differing bits: infinite once half of them differ.
///
/// The expected D given z, -m/2 ln(1 - 2z/m), rounded to the nearest value of z's parity (z plus twice
/// the pairs of differing shingles that cancelled in a bit), as `odd_sketch._deltas`.
fn delta(z: u32) -> f64 {
    if 2 * z as usize >= BITS {
        return f64::INFINITY;
    }
    let z = f64::from(z);
    let expected = -(BITS as f64 / 2.0) * (1.0 - 2.0 * z / BITS as f64).ln();
    z + 2.0 * ((expected - z) / 2.0 + 0.5).floor()
}

/// `OddSketcher.estimate`: the Jaccard similarity of two sketches of one level, in [0, 1] (1 for two
/// empty sets: size 0 at level 0).
///
/// # Errors
/// `Error::Value` for a sketch of the wrong length, or two sketches of different levels.
pub fn estimate(a: &[u8], b: &[u8]) -> Result<f64, Error> {
    for sketch in [a, b] {
        if sketch.len() != BYTES {
            return Err(value(format!(
                "an odd sketch must be {BYTES} bytes, got {}",
                sketch.len()
            )));
        }
    }
    let (size_a, level_a) = header(a);
    let (size_b, level_b) = header(b);
    if level_a != level_b {
        return Err(value(format!(
            "odd sketches at levels {level_a} and {level_b} do not compare: sketch the document at \
             the stored sketch's level"
        )));
    }
    let z: u32 = a[..PARITY_BYTES]
        .iter()
        .zip(&b[..PARITY_BYTES])
        .map(|(x, y)| (x ^ y).count_ones())
        .sum();
    if size_a + size_b == 0 && z == 0 && level_a == 0 {
        // Two empty sets (nothing sampled away at level 0): identical, though 0 / 0 below.
        return Ok(1.0);
    }
    let d = delta(z);
    let total = (size_a + size_b) as f64;
    let estimate = (total - d) / (total + d);
    Ok(if estimate.is_nan() {
        0.0
    } else {
        estimate.clamp(0.0, 1.0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolver::{Answers, Resolver};
    use crate::testing;
    use std::borrow::Cow;

    fn hex(data: &[u8]) -> String {
        data.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn sketch(sketcher: &OddSketcher, job: &MinJob<'_>, level: Option<Level>) -> Vec<u8> {
        let state = testing::state();
        let answers = Answers::default();
        let mut resolver = Resolver::new(&state, &answers);
        let out = sketcher.sketch(job, level, &mut resolver);
        assert!(resolver.take_needs().is_empty());
        assert_eq!(out.len(), BYTES);
        out
    }

    fn bits_set(sketch: &[u8]) -> Vec<usize> {
        (0..BITS)
            .filter(|i| sketch[i / 8] & (0x80 >> (i % 8)) != 0)
            .collect()
    }

    // The expected bytes are `OddSketcher(n=...).sketch(...)`'s, the pure engine's.
    #[test]
    fn sketches_match_the_pure_sketcher() {
        let three = OddSketcher::new(3, 0).unwrap();
        let text = MinJob::Text(Cow::Borrowed("Caf\u{e9} \u{4e2d}\u{6587} ok hello"));
        let got = sketch(&three, &text, None);
        assert_eq!(hex(&got[PARITY_BYTES..]), "0300");
        assert_eq!(bits_set(&got), GOLDEN_TEXT);
        let tokens = MinJob::Tokens(vec!["Hello World".into(), "ok".into()]);
        let got = sketch(&OddSketcher::new(2, 7).unwrap(), &tokens, None);
        assert_eq!(hex(&got[PARITY_BYTES..]), "0100");
        assert_eq!(bits_set(&got), GOLDEN_TOKENS);
        let empty = sketch(&three, &MinJob::Text(Cow::Borrowed(" ")), None);
        assert_eq!(empty, vec![0u8; BYTES]);
    }
    const GOLDEN_TEXT: &[usize] = &[110, 815, 930];
    const GOLDEN_TOKENS: &[usize] = &[558];

    #[test]
    fn one_shingle_sets_one_bit_and_pairs_cancel() {
        let sketcher = OddSketcher::new(3, 5).unwrap();
        let h = 0x1234_5678_9abc_def0u64;
        let slot = (mix(h ^ SLOT_SALT.wrapping_mul(6)) % 1008) as usize;
        let one = sketcher.sketch_of_shingles(&[h], None);
        assert_eq!(bits_set(&one), vec![slot]);
        assert_eq!(&one[PARITY_BYTES..], &[1, 0]);
        // Two shingles on one bit leave it clear: parity, not presence.
        let twin = (1u64..)
            .find(|&g| mix(g ^ SLOT_SALT.wrapping_mul(6)) % 1008 == slot as u64)
            .unwrap();
        let two = sketcher.sketch_of_shingles(&[h, twin], None);
        assert!(bits_set(&two).is_empty());
        assert_eq!(&two[PARITY_BYTES..], &[2, 0]);
    }

    #[test]
    fn long_sets_are_sampled_at_the_smallest_level_that_fits() {
        let sketcher = OddSketcher::new(3, 0).unwrap();
        let set: Vec<u64> = (0..5000u64).map(|i| mix(i.wrapping_mul(0x9E37))).collect();
        let kept_at = |level: u32| {
            set.iter()
                .filter(|&&h| level == 0 || sketcher.depth(h) >= level)
                .count()
        };
        let want = (0..=MAX_LEVEL).find(|&l| kept_at(l) <= LIMIT).unwrap();
        assert!(want >= 2);
        let own = sketcher.sketch_of_shingles(&set, None);
        assert_eq!(header(&own), (kept_at(want), want));
        let at = Level::new(i64::from(want), "level").unwrap();
        assert_eq!(sketcher.sketch_of_shingles(&set, Some(at)), own);
        // Below its own level a set keeps more than 1,024; all 5,000 at level 0, stored as 4,095.
        let below = Level::new(i64::from(want - 1), "level").unwrap();
        let (size, level) = header(&sketcher.sketch_of_shingles(&set, Some(below)));
        assert!(size > LIMIT && level == want - 1);
        let zero = sketcher.sketch_of_shingles(&set, Some(Level(0)));
        assert_eq!(header(&zero), (MAX_SIZE, 0));
        // At most 1,024: level 0, every shingle.
        assert_eq!(
            header(&sketcher.sketch_of_shingles(&set[..1024], None)),
            (1024, 0)
        );
    }

    /// The inverse of `mix`.
    fn unmix(mut z: u64) -> u64 {
        z ^= (z >> 31) ^ (z >> 62);
        z = z.wrapping_mul(0x3196_42b2_d24d_8ec3);
        z ^= (z >> 27) ^ (z >> 54);
        z = z.wrapping_mul(0x96de_1b17_3f11_9089);
        z ^ (z >> 30) ^ (z >> 60)
    }

    #[test]
    fn levels_stop_at_15() {
        let sketcher = OddSketcher::new(3, 0).unwrap();
        let salt = SAMPLE_SALT.wrapping_mul(3);
        assert_eq!(mix(unmix(12345)), 12345);
        // 1,100 shingles whose sampling keys are all below 2^49: kept at every level.
        let deep: Vec<u64> = (1..=1100u64).map(|k| unmix(k << 10) ^ salt).collect();
        assert!(deep.iter().all(|&h| sketcher.depth(h) == MAX_LEVEL));
        let sketch = sketcher.sketch_of_shingles(&deep, None);
        assert_eq!(header(&sketch), (1100, MAX_LEVEL));
    }

    fn with(bits: &[usize], size: u16, level: u16) -> Vec<u8> {
        let mut out = vec![0u8; BYTES];
        for &i in bits {
            out[i / 8] |= 0x80 >> (i % 8);
        }
        out[PARITY_BYTES..].copy_from_slice(&(size | level << 12).to_le_bytes());
        out
    }

    #[test]
    fn estimates_follow_the_symmetric_difference() {
        let a = with(&[1, 2, 3], 500, 0);
        assert_eq!(estimate(&a, &a), Ok(1.0));
        // 10 bits differ: D = -504 ln(1 - 20/1008) = 10.1, rounded to 10 (no pair expected to
        // cancel), J = (1000 - D) / (1000 + D).
        let b = with(
            &[1, 2, 3, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109],
            500,
            0,
        );
        assert_eq!(estimate(&a, &b), Ok(990.0 / 1010.0));
        // 80 bits differ: D = -504 ln(1 - 160/1008) = 87.1, 3.6 pairs cancelled: rounded to 88.
        let many: Vec<usize> = (200..280).collect();
        assert_eq!(delta(80), 88.0);
        assert_eq!(
            estimate(&with(&many, 1000, 0), &with(&[], 1000, 0)),
            Ok(1912.0 / 2088.0)
        );
        // Half of the bits differ or more: saturated, 0.
        let half: Vec<usize> = (0..504).collect();
        assert_eq!(estimate(&with(&half, 900, 1), &with(&[], 900, 1)), Ok(0.0));
        // Two empty sets are identical; two empty samples at a level above 0 tell nothing: 0.
        assert_eq!(estimate(&with(&[], 0, 0), &with(&[], 0, 0)), Ok(1.0));
        assert_eq!(estimate(&with(&[], 0, 2), &with(&[], 0, 2)), Ok(0.0));
        // An empty set against one shingle, or a malformed empty header with bits set: 0.
        assert_eq!(estimate(&with(&[], 0, 0), &with(&[5], 1, 0)), Ok(0.0));
        assert_eq!(estimate(&with(&[], 0, 0), &with(&[5], 0, 0)), Ok(0.0));
        // D larger than both sets: clipped to 0.
        assert_eq!(estimate(&with(&[7], 0, 0), &with(&[8], 1, 0)), Ok(0.0));
    }

    #[test]
    fn bad_arguments_are_refused() {
        let message = |e: Result<f64, Error>| e.err().map(|e| e.to_string());
        let a = with(&[], 3, 0);
        assert_eq!(
            message(estimate(&a[1..], &a)).as_deref(),
            Some("an odd sketch must be 128 bytes, got 127")
        );
        assert_eq!(
            message(estimate(&a, &with(&[], 3, 2))).as_deref(),
            Some(
                "odd sketches at levels 0 and 2 do not compare: sketch the document at the \
                 stored sketch's level"
            )
        );
        assert_eq!(
            OddSketcher::new(0, 0)
                .err()
                .map(|e| e.to_string())
                .as_deref(),
            Some("n must be in 1..16, got 0")
        );
        assert_eq!(
            Level::new(16, "levels[1]")
                .err()
                .map(|e| e.to_string())
                .as_deref(),
            Some("levels[1] must be in 0..15, got 16")
        );
        assert!(Level::new(-1, "level").is_err());
    }

    // The query sketch is the band values, then the sketches at the own level, below and above, as
    // `BandedOddSketcher.sketch_many` puts them together from the separate calls.
    #[test]
    fn banded_queries_are_the_separate_sketches_joined() {
        let three = OddSketcher::new(3, 0).unwrap();
        let bands = testing::band_minhash(3, 0);
        three.banded_check(&bands).unwrap();
        let long: String = (0..3000).map(|i| format!("w{i} ")).collect();
        let middle: String = (0..600).map(|i| format!("w{i} ")).collect();
        for text in [
            "",
            "one two",
            "Caf\u{e9} \u{4e2d}\u{6587} ok hello",
            &middle,
            &long,
        ] {
            let job = MinJob::Text(Cow::Borrowed(text));
            let state = testing::state();
            let answers = Answers::default();
            let mut resolver = Resolver::new(&state, &answers);
            let got = three.banded_query(&bands, &job, 480, &mut resolver);
            let own = sketch(&three, &job, None);
            let (size, level) = header(&own);
            let mut want = bands.sketch(&job, &mut resolver);
            want.extend(&own);
            let at = |l: u32| sketch(&three, &job, Some(Level(l)));
            want.extend(if level > 0 {
                at(level - 1)
            } else {
                vec![0; BYTES]
            });
            let up = size >= 480 && level < MAX_LEVEL;
            want.extend(if up { at(level + 1) } else { vec![0; BYTES] });
            assert_eq!(hex(&got), hex(&want), "{text:.20}");
            assert_eq!(got.len(), 32 + 3 * BYTES);
            let stored = three.banded_stored(&bands, &job, &mut resolver);
            assert_eq!(hex(&stored), hex(&got[..32 + BYTES]), "{text:.20}");
        }
        let message = three
            .banded_check(&testing::band_minhash(2, 0))
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            message.as_deref(),
            Some("the band MinHash (n=2, seed=0) must share the odd sketch's n=3 and seed=0")
        );
        assert!(three.banded_check(&testing::band_minhash(3, 1)).is_err());
    }
}
