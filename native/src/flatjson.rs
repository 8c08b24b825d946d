//! A scanner for the one JSON shape the line readers take without Python: a flat object.
//!
//! A flat object's values are strings, numbers, true, false or null, written exactly as JSON allows
//! (no NaN, no trailing comma, no raw control character in a string), with plain keys (no escapes).
//! Whatever the scanner refuses is left to the pure reader, whose records and error messages stay the
//! only ones there are; whatever it takes, Python's json reads to the same values.

use std::borrow::Cow;

/// The most digits an integer may have here: Python's lowest int_max_str_digits.
const MAX_INT_DIGITS: usize = 640;

/// JSON's white space, the only kind allowed between tokens.
fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r')
}

/// A field's value as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value<'a> {
    /// A string without escapes: its text.
    Text(&'a str),
    /// A string with escapes, all well formed: its text between the quotes.
    Escaped(&'a str),
    /// A number, true, false or null: its text.
    Scalar(&'a str),
}

/// A cursor over one line.
struct Scan<'a> {
    text: &'a str,
    line: &'a [u8],
    at: usize,
}

impl<'a> Scan<'a> {
    fn skip_space(&mut self) {
        while self.at < self.line.len() && is_space(self.line[self.at]) {
            self.at += 1;
        }
    }

    /// The next byte after white space, consumed.
    fn next_token(&mut self) -> Option<u8> {
        self.skip_space();
        let byte = *self.line.get(self.at)?;
        self.at += 1;
        Some(byte)
    }

    /// A string (its opening quote already consumed): its bytes and whether it holds escapes, each
    /// checked to be one JSON allows; None for a raw control character or a bad escape.
    fn string(&mut self) -> Option<(&'a str, bool)> {
        let start = self.at;
        let mut escaped = false;
        loop {
            let rest = self.line.get(self.at..)?;
            let found = memchr::memchr2(b'"', b'\\', rest)?;
            self.at += found + 1;
            if rest[found] == b'"' {
                break;
            }
            escaped = true;
            match *self.line.get(self.at)? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.at += 1,
                b'u' => {
                    let hex = self.line.get(self.at + 1..self.at + 5)?;
                    if !hex.iter().all(u8::is_ascii_hexdigit) {
                        return None;
                    }
                    self.at += 5;
                }
                _ => return None,
            }
        }
        // Quotes are ASCII: the cut is at character boundaries.
        let content = self.text.get(start..self.at - 1)?;
        // A branch-free pass the compiler vectorises: the common text holds no control character.
        if content
            .bytes()
            .fold(false, |seen, byte| seen | (byte < 0x20))
        {
            return None;
        }
        Some((content, escaped))
    }

    /// Consume the longest run of ASCII digits; whether there was one.
    fn digits(&mut self) -> bool {
        let start = self.at;
        while self.at < self.line.len() && self.line[self.at].is_ascii_digit() {
            self.at += 1;
        }
        self.at > start
    }

    /// A number, true, false or null (its first byte already consumed), exactly as JSON writes them.
    fn scalar(&mut self, first: u8) -> Option<&'a str> {
        let start = self.at - 1;
        for literal in [&b"true"[..], b"false", b"null"] {
            if first == literal[0] {
                let rest = &literal[1..];
                let found = self.line.get(self.at..self.at + rest.len())? == rest;
                self.at += rest.len();
                return found.then(|| self.text.get(start..self.at)).flatten();
            }
        }
        let mut first = first;
        if first == b'-' {
            first = *self.line.get(self.at)?;
            self.at += 1;
        }
        match first {
            b'0' => {}
            b'1'..=b'9' => {
                let digits_start = self.at - 1;
                self.digits();
                // Python reads a longer integer only up to its int_max_str_digits (640 at the least):
                // whether such a line is valid is the pure reader's to say.
                if self.at - digits_start >= MAX_INT_DIGITS
                    && !matches!(self.line.get(self.at), Some(b'.' | b'e' | b'E'))
                {
                    return None;
                }
            }
            _ => return None,
        }
        if self.line.get(self.at) == Some(&b'.') {
            self.at += 1;
            if !self.digits() {
                return None;
            }
        }
        if matches!(self.line.get(self.at), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.line.get(self.at), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if !self.digits() {
                return None;
            }
        }
        self.text.get(start..self.at)
    }
}

/// The fields of a flat object, in order, when the line (valid UTF-8) is exactly one, white space
/// and line end around it allowed; else None.
fn flat_object(line: &[u8]) -> Option<Vec<(&str, Value<'_>)>> {
    let text = simdutf8::basic::from_utf8(line).ok()?;
    let mut scan = Scan { text, line, at: 0 };
    if scan.next_token()? != b'{' {
        return None;
    }
    let mut fields = Vec::with_capacity(4);
    loop {
        if scan.next_token()? != b'"' {
            return None; // `{}` too: its missing fields are reported by the pure reader
        }
        let (key, escaped) = scan.string()?;
        if escaped || scan.next_token()? != b':' {
            return None;
        }
        let value = match scan.next_token()? {
            b'"' => match scan.string()? {
                (text, false) => Value::Text(text),
                (text, true) => Value::Escaped(text),
            },
            first => Value::Scalar(scan.scalar(first)?),
        };
        fields.push((key, value));
        match scan.next_token()? {
            b',' => continue,
            b'}' => break,
            _ => return None,
        }
    }
    scan.skip_space();
    (scan.at == line.len()).then_some(fields)
}

/// The values of two fields of a flat object, when the line is one and names each of them exactly
/// once (a field named twice: the last wins in Python's readers; left to them rather than copied).
pub fn two_fields<'a>(
    line: &'a [u8],
    first: &[u8],
    second: &[u8],
) -> Option<(Value<'a>, Value<'a>)> {
    let (mut one, mut two) = (None, None);
    for (key, value) in flat_object(line)? {
        if key.as_bytes() == first && one.replace(value).is_some() {
            return None;
        }
        if key.as_bytes() == second && two.replace(value).is_some() {
            return None;
        }
    }
    Some((one?, two?))
}

/// The text of a string value, its escapes decoded as Python's json decodes them (a surrogate pair
/// to one character); None for a lone surrogate, which no Rust string holds.
pub fn text_of<'a>(value: &Value<'a>) -> Option<Cow<'a, str>> {
    match *value {
        Value::Text(text) => Some(Cow::Borrowed(text)),
        Value::Escaped(text) => unescape(text).map(Cow::Owned),
        Value::Scalar(_) => None,
    }
}

fn hex4(digits: &str) -> Option<u32> {
    u32::from_str_radix(digits.get(..4)?, 16).ok()
}

/// Decode the escapes of a string `Scan::string` checked.
fn unescape(raw: &str) -> Option<String> {
    let mut out = String::with_capacity(raw.len());
    let mut at = 0;
    // Every cut is next to an escape's ASCII bytes: at a character boundary.
    while let Some(found) = memchr::memchr(b'\\', &raw.as_bytes()[at..]) {
        out.push_str(raw.get(at..at + found)?);
        at += found + 1;
        let kind = *raw.as_bytes().get(at)?;
        at += 1;
        let decoded = match kind {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let first = hex4(raw.get(at..)?)?;
                at += 4;
                if (0xD800..0xDC00).contains(&first) && raw.get(at..at + 2) == Some("\\u") {
                    let second = hex4(raw.get(at + 2..)?)?;
                    if (0xDC00..0xE000).contains(&second) {
                        at += 6;
                        char::from_u32(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))?
                    } else {
                        return None; // a lone high surrogate
                    }
                } else {
                    char::from_u32(first)? // None for a lone surrogate
                }
            }
            _ => return None,
        };
        out.push(decoded);
    }
    out.push_str(raw.get(at..)?);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string_of(line: &[u8]) -> Option<Cow<'_, str>> {
        let fields = flat_object(line)?;
        text_of(&fields[0].1)
    }

    #[test]
    fn reads_flat_objects() {
        let fields =
            flat_object(b" {\"a\": \"x\", \"b\":-0.5e+3 ,\"c\":true,\"d\":\"\\n\"}\r\n").unwrap();
        assert_eq!(
            fields,
            vec![
                ("a", Value::Text("x")),
                ("b", Value::Scalar("-0.5e+3")),
                ("c", Value::Scalar("true")),
                ("d", Value::Escaped("\\n")),
            ]
        );
    }

    #[test]
    fn decodes_escapes_as_python_does() {
        let cases: [(&[u8], &str); 6] = [
            (b"{\"t\":\"a\\\"b\\\\c\\/d\"}", "a\"b\\c/d"),
            (b"{\"t\":\"\\b\\f\\n\\r\\t\"}", "\u{8}\u{c}\n\r\t"),
            (b"{\"t\":\"\\u00e9\\u4E2D\"}", "\u{e9}\u{4e2d}"),
            (b"{\"t\":\"\\ud83d\\ude00!\"}", "\u{1f600}!"),
            (b"{\"t\":\"caf\xc3\xa9 \\u0000\"}", "caf\u{e9} \u{0}"),
            (b"{\"t\":\"plain\"}", "plain"),
        ];
        for (line, text) in cases {
            assert_eq!(string_of(line).as_deref(), Some(text), "{line:?}");
        }
    }

    #[test]
    fn refuses_what_it_cannot_read_exactly() {
        for line in [
            &b"{\"t\":\"\\ud83d\"}"[..],   // a lone high surrogate
            b"{\"t\":\"\\ude00\"}",        // a lone low surrogate
            b"{\"t\":\"\\ud83d\\u0041\"}", // a high one before a non-surrogate
            b"{\"t\":\"\\x41\"}",          // not a JSON escape
            b"{\"t\":\"\\u12\"}",          // too short
            b"{\"t\":\"\\u12g4\"}",        // not hex
            b"{\"t\":\"a\tb\"}",           // a raw control character
            b"{\"t\":\"a\\\"}",            // unterminated
            b"{\"t\\u0041\":\"a\"}",       // an escaped key
            b"{\"t\":\"\xff\"}",           // not UTF-8
            b"{\"t\":NaN}",
            b"{\"t\":01}",
            b"{\"t\":\"a\",}",
        ] {
            assert_eq!(string_of(line), None, "{line:?}");
        }
    }
}
