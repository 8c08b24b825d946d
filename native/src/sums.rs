//! Per-bit sums of feature hashes, the SimHash vote.
//!
//! `Counter` counts, for each of the f bits, the features whose hash has that bit set, with byte-lane
//! counters (eight counts per `u64`, added up to 255 times before they are flushed), the same counts
//! as `simhash_redis.fingerprinting.hashing.bit_sums`. The fingerprint has bit j set where
//! `2 * count[j] > total`, that is where `C_j = count[j] - (total - count[j]) > 0`. `FloatSums` is
//! the weighted vote: float64 sums taken feature by feature, starting at 0.0, as numpy's row-by-row
//! reduction does.

const ONES: u64 = 0x0101_0101_0101_0101;

/// Counts of set bits per bit position over the features of one document.
///
/// Counter `acc[i]` holds in its byte j the number of features (since the last flush) with bit
/// 8j + i set (bit 64 + 8j + i for `acc[8 + i]`): eight shifts, masks and adds per 64 bits of a
/// feature, flushed into `counts` every 255 features, before a byte can overflow.
pub struct Counter {
    f: u32,
    mask: u64,
    acc: [u64; 16],
    pending: u32,
    counts: [u64; 128],
    total: u64,
}

impl Counter {
    /// A counter for fingerprints of `f` bits (32, 64 or 128).
    pub fn new(f: u32) -> Self {
        Counter {
            f: f.clamp(32, 128),
            mask: if f < 64 { ONES & 0xFFFF_FFFF } else { ONES },
            acc: [0; 16],
            pending: 0,
            counts: [0; 128],
            total: 0,
        }
    }

    /// Count one feature whose bit j is bit j of `bits`.
    #[inline(always)]
    pub fn add(&mut self, bits: u128) {
        let low = bits as u64;
        let (lanes, high) = self.acc.split_at_mut(8);
        for (i, acc) in lanes.iter_mut().enumerate() {
            *acc += (low >> i) & self.mask;
        }
        if self.f > 64 {
            let high_bits = (bits >> 64) as u64;
            for (i, acc) in high.iter_mut().enumerate() {
                *acc += (high_bits >> i) & ONES;
            }
        }
        self.total += 1;
        self.pending += 1;
        if self.pending == 255 {
            self.flush();
        }
    }

    fn flush(&mut self) {
        for (i, acc) in self.acc.iter_mut().enumerate() {
            let (lane, bit) = (i / 8, i % 8);
            for j in 0..8 {
                if let Some(count) = self.counts.get_mut(64 * lane + 8 * j + bit) {
                    *count += (*acc >> (8 * j)) & 0xFF;
                }
            }
            *acc = 0;
        }
        self.pending = 0;
    }

    /// The features counted so far.
    #[cfg(test)]
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The fingerprint: bit j set where more than half the features have bit j set.
    pub fn finish(mut self) -> u128 {
        self.flush();
        let total = u128::from(self.total);
        let mut out = 0u128;
        for (j, &count) in self.counts.iter().take(self.f as usize).enumerate() {
            if 2 * u128::from(count) > total {
                out |= 1u128 << j;
            }
        }
        out
    }
}

/// Float64 per-bit sums of weighted features, added feature by feature.
pub struct FloatSums {
    f: usize,
    sums: [f64; 128],
}

impl FloatSums {
    /// Sums for fingerprints of `f` bits, all starting at 0.0.
    pub fn new(f: u32) -> Self {
        FloatSums {
            f: (f as usize).min(128),
            sums: [0.0; 128],
        }
    }

    /// Add `weight` where the feature's bit is set and `-weight` where it is not.
    pub fn add(&mut self, bits: u128, weight: f64) {
        for (j, sum) in self.sums.iter_mut().take(self.f).enumerate() {
            *sum += if (bits >> j) & 1 == 1 {
                weight
            } else {
                -weight
            };
        }
    }

    /// The fingerprint: bit j set where the sum is > 0.
    pub fn finish(&self) -> u128 {
        let mut out = 0u128;
        for (j, &sum) in self.sums.iter().take(self.f).enumerate() {
            if sum > 0.0 {
                out |= 1u128 << j;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(values: &[u128], f: u32) -> u128 {
        let mut out = 0u128;
        for j in 0..f {
            let ones = values.iter().filter(|&&v| (v >> j) & 1 == 1).count();
            if 2 * ones > values.len() {
                out |= 1 << j;
            }
        }
        out
    }

    #[test]
    fn counter_matches_naive() {
        let mut state = 0x1234_5678_9abc_def0u64;
        for &f in &[32u32, 64, 128] {
            for &m in &[0usize, 1, 2, 254, 255, 256, 511, 1000, 3000] {
                let values: Vec<u128> = (0..m)
                    .map(|_| {
                        state = crate::hash::mix(state.wrapping_add(1));
                        let low = state;
                        state = crate::hash::mix(state.wrapping_add(1));
                        let wide = u128::from(low) | (u128::from(state) << 64);
                        if f == 128 {
                            wide
                        } else {
                            wide & ((1u128 << f) - 1)
                        }
                    })
                    .collect();
                let mut counter = Counter::new(f);
                for &v in &values {
                    counter.add(v);
                }
                assert_eq!(counter.total(), m as u64);
                assert_eq!(counter.finish(), naive(&values, f), "f={f} m={m}");
            }
        }
    }

    #[test]
    fn float_sums_tie_is_zero() {
        let mut sums = FloatSums::new(64);
        sums.add(u128::from(u64::MAX), 1.5);
        sums.add(0, 1.5);
        assert_eq!(sums.finish(), 0);
        sums.add(1, 0.25);
        assert_eq!(sums.finish(), 1);
    }
}
