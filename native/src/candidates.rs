//! The read path's candidate filter (`store.candidates.pure_hits`): stored decimal values to
//! fingerprints and distances, for the plain decimals this library writes; anything else is left to
//! Python's `int()`.

/// The value of eight ASCII digits (the first in the lowest byte), or None if one is not a digit.
#[inline(always)]
fn parse8(chunk: u64) -> Option<u64> {
    let v = chunk.wrapping_sub(0x3030_3030_3030_3030);
    // A byte below '0' borrows and one above '9' overflows its low nibble: both set a high nibble.
    if (v | v.wrapping_add(0x0606_0606_0606_0606)) & 0xF0F0_F0F0_F0F0_F0F0 != 0 {
        return None;
    }
    let v = (v.wrapping_mul(10) + (v >> 8)) & 0x00FF_00FF_00FF_00FF;
    let v = (v.wrapping_mul(100) + (v >> 16)) & 0x0000_FFFF_0000_FFFF;
    Some((v.wrapping_mul(10_000) + (v >> 32)) & 0xFFFF_FFFF)
}

/// Parse `-?[0-9]+` as `int()` would, as a sign and a magnitude below 2^128; None for any other form
/// or a larger magnitude (both left to Python).
pub fn parse_decimal(raw: &[u8]) -> Option<(bool, u128)> {
    let (negative, digits) = match raw.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, raw),
    };
    if digits.is_empty() || digits.len() > 64 {
        return None;
    }
    let mut chunks = digits.chunks_exact(8);
    let value = if digits.len() <= 19 {
        // Below 10^19 < 2^64: no overflow in 64-bit arithmetic.
        let mut value: u64 = 0;
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            value = value * 100_000_000 + parse8(u64::from_le_bytes(word))?;
        }
        for &d in chunks.remainder() {
            if !d.is_ascii_digit() {
                return None;
            }
            value = value * 10 + u64::from(d - b'0');
        }
        u128::from(value)
    } else {
        let mut value: u128 = 0;
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            let part = parse8(u64::from_le_bytes(word))?;
            value = value
                .checked_mul(100_000_000)?
                .checked_add(u128::from(part))?;
        }
        for &d in chunks.remainder() {
            if !d.is_ascii_digit() {
                return None;
            }
            value = value.checked_mul(10)?.checked_add(u128::from(d - b'0'))?;
        }
        value
    };
    Some((negative && value != 0, value))
}

/// `codec.decode_fp` of a parsed value, as a non-negative fingerprint: negatives wrap by 2^64 when
/// f = 64; None when the result would be negative (left to Python's arithmetic on negative ints).
pub fn decode((negative, magnitude): (bool, u128), wrap64: bool) -> Option<u128> {
    if !negative {
        return Some(magnitude);
    }
    let wrap = 1u128 << 64;
    if wrap64 && magnitude <= wrap {
        Some(wrap - magnitude)
    } else {
        None
    }
}

/// The candidate and its distance to a query, or None when Python must decide.
#[inline]
pub fn candidate(raw: &[u8], fp: u128, wrap64: bool) -> Option<(u128, u32)> {
    let value = decode(parse_decimal(raw)?, wrap64)?;
    Some((value, (value ^ fp).count_ones()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_int() {
        assert_eq!(parse_decimal(b"0"), Some((false, 0)));
        assert_eq!(parse_decimal(b"-0"), Some((false, 0)));
        assert_eq!(parse_decimal(b"007"), Some((false, 7)));
        assert_eq!(
            parse_decimal(b"-9223372036854775808"),
            Some((true, 1u128 << 63))
        );
        assert_eq!(
            parse_decimal(b"340282366920938463463374607431768211455"),
            Some((false, u128::MAX))
        );
        assert_eq!(
            parse_decimal(b"340282366920938463463374607431768211456"),
            None
        );
        assert_eq!(parse_decimal(b""), None);
        assert_eq!(parse_decimal(b"-"), None);
        assert_eq!(parse_decimal(b"+1"), None);
        assert_eq!(parse_decimal(b" 1"), None);
        assert_eq!(parse_decimal(b"1_0"), None);
        assert_eq!(parse_decimal(b"12345678"), Some((false, 12_345_678)));
        assert_eq!(parse_decimal(b"1234567/"), None);
        assert_eq!(parse_decimal(b"1234567:"), None);
        assert_eq!(
            parse_decimal(b"-1234567812345678"),
            Some((true, 1_234_567_812_345_678))
        );
        for value in [
            0u128,
            9,
            10,
            99_999_999,
            100_000_000,
            u128::from(u64::MAX),
            u128::MAX,
            10u128.pow(38),
        ] {
            assert_eq!(
                parse_decimal(value.to_string().as_bytes()),
                Some((false, value))
            );
        }
    }

    #[test]
    fn decodes_signed_64() {
        assert_eq!(decode((true, 1), true), Some(u128::from(u64::MAX)));
        assert_eq!(decode((true, 1u128 << 64), true), Some(0));
        assert_eq!(decode((true, (1u128 << 64) + 1), true), None);
        assert_eq!(decode((true, 1), false), None);
        assert_eq!(candidate(b"-1", 0, true), Some((u128::from(u64::MAX), 64)));
        assert_eq!(candidate(b"5", 4, false), Some((5, 1)));
    }
}
