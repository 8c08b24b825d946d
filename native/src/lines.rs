//! Lines of precomputed fingerprints (`{"id": "...", "fp": "8ffe..."}`) read without building objects.
//!
//! Only the plain shape is read here: a flat JSON object (`flatjson`); an ASCII id string and a
//! fingerprint string in plain hex or decimal that fits, both without escapes. Every other line (nested
//! values, a field named twice, anything malformed) is left to the pure reader, so its records and
//! error messages stay the only ones there are.

use crate::error::{value, Error};
use crate::flatjson::{two_fields, Value};

/// How fingerprint text is read: `codec.parse_fingerprint`'s `base`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Base {
    /// Decimal when it is digits only (a sign allowed), else hex.
    Auto,
    Hex,
    Dec,
}

/// `codec.parse_fingerprint` of text without white space: plain hex (an optional 0x) or a decimal
/// (negative ones as f-bit two's complement) that fits in f bits; None for anything else, whose value
/// or error the pure reader gives.
fn plain_fingerprint(text: &[u8], f: u32, base: Base) -> Option<u128> {
    let (negative, digits) = match text {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, text),
    };
    let decimal = !digits.is_empty() && digits.iter().all(u8::is_ascii_digit);
    match base {
        Base::Dec | Base::Auto if decimal => plain_decimal(negative, digits, f),
        Base::Dec => None,
        Base::Auto | Base::Hex => plain_hex(text, f),
    }
}

fn plain_hex(text: &[u8], f: u32) -> Option<u128> {
    let digits = match text {
        [b'0', b'x' | b'X', rest @ ..] => rest,
        _ => text,
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let first = digits
        .iter()
        .position(|&digit| digit != b'0')
        .unwrap_or(digits.len());
    let significant = &digits[first..];
    if significant.len() > 32 {
        return None;
    }
    let mut value: u128 = 0;
    for &digit in significant {
        value = (value << 4) | u128::from(char::from(digit).to_digit(16)?);
    }
    fits(value, f)
}

fn plain_decimal(negative: bool, digits: &[u8], f: u32) -> Option<u128> {
    let mut magnitude: u128 = 0;
    for &digit in digits {
        magnitude = magnitude
            .checked_mul(10)?
            .checked_add(u128::from(digit - b'0'))?;
    }
    if !negative || magnitude == 0 {
        return fits(magnitude, f);
    }
    // -m for 0 < m <= 2^(f-1) is 2^f - m; a more negative value does not fit.
    if magnitude > 1u128 << (f - 1) {
        return None;
    }
    Some(if f == 128 {
        u128::MAX - magnitude + 1
    } else {
        (1u128 << f) - magnitude
    })
}

fn fits(value: u128, f: u32) -> Option<u128> {
    (f >= 128 || value >> f == 0).then_some(value)
}

/// What to find in each line.
pub struct Wanted<'a> {
    pub id_field: &'a [u8],
    pub fp_field: &'a [u8],
    pub f: u32,
    pub base: Base,
    pub max_id: usize,
}

/// A line's id and fingerprint when the line has the plain shape, else None (the pure reader's case).
pub fn plain_line<'a>(line: &'a [u8], wanted: &Wanted<'_>) -> Option<(&'a [u8], u128)> {
    let (Value::Text(id), Value::Text(fp)) = two_fields(line, wanted.id_field, wanted.fp_field)?
    else {
        return None;
    };
    if id.is_empty() || id.len() > wanted.max_id || !id.is_ascii() {
        return None;
    }
    Some((
        id.as_bytes(),
        plain_fingerprint(fp.as_bytes(), wanted.f, wanted.base)?,
    ))
}

impl<'a> Wanted<'a> {
    /// What to find, checked: f in 1..=128, base "auto", "hex" or "dec".
    ///
    /// # Errors
    /// `Error::Value` for f or base out of range.
    pub fn new(
        id_field: &'a [u8],
        fp_field: &'a [u8],
        f: u32,
        base: &str,
        max_id: usize,
    ) -> Result<Self, Error> {
        if !(1..=128).contains(&f) {
            return Err(value(format!("f must be in 1..128, got {f}")));
        }
        let base = match base {
            "auto" => Base::Auto,
            "hex" => Base::Hex,
            "dec" => Base::Dec,
            _ => {
                return Err(value(format!(
                    "fp_base must be auto, hex or dec, got {base:?}"
                )))
            }
        };
        Ok(Wanted {
            id_field,
            fp_field,
            f,
            base,
            max_id,
        })
    }
}

/// The ids (ASCII) and fingerprints of the lines of the plain shape, and the positions of the others
/// (for the pure reader), in input order.
pub fn read_lines<'a>(
    lines: impl IntoIterator<Item = &'a [u8]>,
    wanted: &Wanted<'_>,
) -> (Vec<(&'a str, u128)>, Vec<usize>) {
    let mut found = Vec::new();
    let mut others = Vec::new();
    for (position, line) in lines.into_iter().enumerate() {
        // plain_line's ids are ASCII, so valid UTF-8.
        match plain_line(line, wanted)
            .and_then(|(id, fp)| Some((std::str::from_utf8(id).ok()?, fp)))
        {
            Some(pair) => found.push(pair),
            None => others.push(position),
        }
    }
    (found, others)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wanted() -> Wanted<'static> {
        Wanted {
            id_field: b"id",
            fp_field: b"fp",
            f: 64,
            base: Base::Auto,
            max_id: 512,
        }
    }

    #[test]
    fn reads_the_plain_shape() {
        let line = b" {\"id\": \"a-1\", \"x\": \"\xc3\xa9\", \"fp\":\"0x8ffe\"}\r\n";
        assert_eq!(plain_line(line, &wanted()), Some((&b"a-1"[..], 0x8ffe)));
        let wide = b"{\"id\":\"a\",\"fp\":\"ffffffffffffffffffffffffffffffff\"}";
        assert_eq!(plain_line(wide, &wanted()), None);
        let wanted128 = Wanted { f: 128, ..wanted() };
        assert_eq!(plain_line(wide, &wanted128), Some((&b"a"[..], u128::MAX)));
        let decimal = b"{\"id\":\"a\",\"fp\":\"-1\"}";
        assert_eq!(
            plain_line(decimal, &wanted()),
            Some((&b"a"[..], u128::from(u64::MAX)))
        );
        assert_eq!(
            plain_line(decimal, &wanted128),
            Some((&b"a"[..], u128::MAX))
        );
        let lowest = b"{\"id\":\"a\",\"fp\":\"-9223372036854775808\"}";
        assert_eq!(plain_line(lowest, &wanted()), Some((&b"a"[..], 1 << 63)));
        let twelve = b"{\"id\":\"a\",\"fp\":\"0012\"}";
        assert_eq!(plain_line(twelve, &wanted()), Some((&b"a"[..], 12)));
        let escapes = b"{\"id\":\"a\",\"url\":\"http:\\/\\/x\\n\\ud800\",\"fp\":\"1f\"}";
        assert_eq!(plain_line(escapes, &wanted()), Some((&b"a"[..], 0x1f)));
        let scalars = b"{\"n\":-0.5e+3,\"id\":\"a\",\"t\":true,\"fp\":\"1f\",\"z\":null,\"m\":0}";
        assert_eq!(plain_line(scalars, &wanted()), Some((&b"a"[..], 0x1f)));
        let long = |digits: usize, tail: &str| {
            format!(
                "{{\"id\":\"a\",\"fp\":\"1f\",\"n\":-{}{tail}}}",
                "1".repeat(digits)
            )
            .into_bytes()
        };
        assert_eq!(
            plain_line(&long(639, ""), &wanted()),
            Some((&b"a"[..], 0x1f))
        );
        assert_eq!(plain_line(&long(640, ""), &wanted()), None);
        assert_eq!(
            plain_line(&long(5000, ".5"), &wanted()),
            Some((&b"a"[..], 0x1f))
        );
    }

    #[test]
    fn leaves_everything_else_to_python() {
        for line in [
            &b""[..],
            b"{}",
            b"[]",
            b"{\"id\":\"a\",\"fp\":\"18446744073709551616\"}", // 2^64
            b"{\"id\":\"a\",\"fp\":\"-9223372036854775809\"}", // -2^63 - 1
            b"{\"id\":\"a\",\"fp\":\" 12\"}",
            b"{\"id\":\"a\",\"fp\":\"-\"}",
            b"{\"id\":\"a\",\"fp\":\"1\\u0032f\"}", // an escape
            b"{\"id\":\"a\",\"fp\":\"1f\",\"n\":01}",
            b"{\"id\":\"a\",\"fp\":\"1f\",\"n\":1.}",
            b"{\"id\":\"a\",\"fp\":\"1f\",\"n\":-}",
            b"{\"id\":\"a\",\"fp\":\"1f\",\"n\":1e}",
            b"{\"id\":\"a\",\"fp\":\"1f\",\"n\":+1}",
            b"{\"id\":\"a\",\"fp\":\"1f\",\"n\":NaN}",
            b"{\"id\":\"a\",\"fp\":\"1f\",\"n\":tru}",
            b"{\"id\":\"a\",\"fp\":\"1f\",\"n\":[]}",
            b"{\"id\":1,\"fp\":\"1f\"}",
            b"{\"id\":\"a\",\"fp\":null}",
            b"{\"id\":\"a\",\"fp\":\"1f\",\"id\":\"b\"}",
            b"{\"id\":\"\",\"fp\":\"1f\"}",
            b"{\"id\":\"\xc3\xa9\",\"fp\":\"1f\"}",
            b"{\"id\":\"a\",\"fp\":\"1f\"} x",
            b"{\"id\":\"a\",\"fp\":\"1f\",}",
            b"{\"id\":\"a\",\"fp\":\"0x\"}",
            b"{\"id\":\"a\",\"fp\":\"0x10000000000000000\"}", // 65 bits
            b"{\"id\":\"a\",\"fp\":\"1f\"\x0b}",
            b"{\"id\":\"a\xff\",\"fp\":\"1f\"}",
        ] {
            assert_eq!(plain_line(line, &wanted()), None, "{line:?}");
        }
        let hex = Wanted {
            base: Base::Hex,
            ..wanted()
        };
        let twelve = b"{\"id\":\"a\",\"fp\":\"12\"}";
        assert_eq!(plain_line(twelve, &hex), Some((&b"a"[..], 0x12)));
        assert_eq!(plain_line(b"{\"id\":\"a\",\"fp\":\"-12\"}", &hex), None);
        let dec = Wanted {
            base: Base::Dec,
            ..wanted()
        };
        assert_eq!(plain_line(b"{\"id\":\"a\",\"fp\":\"1f\"}", &dec), None);
        assert_eq!(plain_line(twelve, &dec), Some((&b"a"[..], 12)));
    }

    #[test]
    fn lines_are_split_into_plain_ones_and_the_rest() {
        let lines: [&[u8]; 3] = [
            b"{\"id\":\"a\",\"fp\":\"1f\"}",
            b"{}",
            b"{\"id\":\"b\",\"fp\":\"12\"}",
        ];
        let wanted = Wanted::new(b"id", b"fp", 64, "hex", 8).unwrap();
        assert_eq!(
            read_lines(lines, &wanted),
            (vec![("a", 0x1f), ("b", 0x12)], vec![1])
        );
        assert_eq!(
            Wanted::new(b"id", b"fp", 0, "hex", 8).err(),
            Some(Error::Value(String::from("f must be in 1..128, got 0")))
        );
        assert_eq!(
            Wanted::new(b"id", b"fp", 64, "oct", 8).err(),
            Some(Error::Value(String::from(
                "fp_base must be auto, hex or dec, got \"oct\""
            )))
        );
    }
}
