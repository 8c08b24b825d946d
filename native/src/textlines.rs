//! Lines of texts (`{"id": "...", "text": "..."}`) read and fingerprinted without building objects.
//!
//! Only the plain shape is read here: a flat JSON object (`flatjson`) whose id is a string without
//! escapes or an integer, and whose text is a string that is not blank and holds no lone surrogate.
//! Every other line is left to the pure reader, so its records and error messages stay the only ones
//! there are; for the lines read here, the ids and texts are the ones Python's json gives (the Python
//! boundary fingerprints the texts as `Engine.fingerprint_many` does).

use std::borrow::Cow;

use crate::flatjson::{text_of, two_fields, Value};

/// What to find in each line.
pub struct Wanted<'a> {
    pub id_field: &'a [u8],
    pub text_field: &'a [u8],
    pub max_id: usize,
}

/// An integer written as `str(int(raw))` writes it back: no minus zero.
fn is_plain_integer(raw: &[u8]) -> bool {
    let digits = raw.strip_prefix(b"-").unwrap_or(raw);
    match digits {
        [b'0'] => raw.len() == 1,
        [b'1'..=b'9', rest @ ..] => rest.iter().all(u8::is_ascii_digit),
        _ => false,
    }
}

/// Whether a text holds a character Python's `str.isspace` surely calls no white space. The set
/// allowed for white space here is a superset of Python's (Unicode White_Space, the ASCII separators
/// 0x1C-0x1F, and U+180E, white space in older Unicode): a text of only those goes to the pure reader.
fn surely_not_blank(text: &str) -> bool {
    text.chars()
        .any(|ch| !(ch.is_whitespace() || matches!(ch, '\x1c'..='\x1f' | '\u{180e}')))
}

/// A line's id and text when the line has the plain shape, else None (the pure reader's case).
pub fn text_line<'a>(line: &'a [u8], wanted: &Wanted<'_>) -> Option<(&'a str, Cow<'a, str>)> {
    let (id, text) = two_fields(line, wanted.id_field, wanted.text_field)?;
    let id = match id {
        Value::Text(id) => id,
        Value::Scalar(raw) if is_plain_integer(raw.as_bytes()) => raw,
        _ => return None,
    };
    if id.is_empty() || id.len() > wanted.max_id {
        return None;
    }
    let text = text_of(&text)?;
    if !surely_not_blank(&text) {
        return None;
    }
    Some((id, text))
}

/// Texts laid end to end (the values of an Arrow string column), each cut at its bounds: those valid
/// in UTF-8 and surely not blank, and the positions of the others (for the pure reader), in order.
/// None when the bounds are not those of `data`: decreasing, or past its end.
#[allow(clippy::type_complexity)]
pub fn packed_texts<'a>(
    data: &'a [u8],
    bounds: &[usize],
) -> Option<(Vec<(usize, &'a str)>, Vec<usize>)> {
    let mut found = Vec::with_capacity(bounds.len().saturating_sub(1));
    let mut others = Vec::new();
    for (position, pair) in bounds.windows(2).enumerate() {
        let raw = data.get(pair[0]..pair[1])?;
        match simdutf8::basic::from_utf8(raw) {
            Ok(text) if surely_not_blank(text) => found.push((position, text)),
            _ => others.push(position),
        }
    }
    Some((found, others))
}

/// The ids and texts of the lines of the plain shape, and the positions of the others (for the pure
/// reader), in input order.
#[allow(clippy::type_complexity)]
pub fn read_text_lines<'a>(
    lines: impl IntoIterator<Item = &'a [u8]>,
    wanted: &Wanted<'_>,
) -> (Vec<(&'a str, Cow<'a, str>)>, Vec<usize>) {
    let mut found = Vec::new();
    let mut others = Vec::new();
    for (position, line) in lines.into_iter().enumerate() {
        match text_line(line, wanted) {
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
            text_field: b"text",
            max_id: 8,
        }
    }

    #[test]
    fn reads_the_plain_shape() {
        let line = b"{\"id\": \"d-1\", \"n\": 2, \"text\": \"Caf\xc3\xa9 \\\"au\\\" lait\\n\"}\n";
        let (id, text) = text_line(line, &wanted()).unwrap();
        assert_eq!((id, &*text), ("d-1", "Caf\u{e9} \"au\" lait\n"));
        for (raw, expected) in [("-12", "-12"), ("0", "0"), ("7", "7")] {
            let line = format!("{{\"id\":{raw},\"text\":\"x\"}}");
            assert_eq!(
                text_line(line.as_bytes(), &wanted()).map(|(id, _)| id.to_owned()),
                Some(expected.to_owned())
            );
        }
        let spaced = b"{\"id\":\"a\",\"text\":\" \\u3000x\"}";
        assert!(text_line(spaced, &wanted()).is_some());
    }

    #[test]
    fn leaves_everything_else_to_python() {
        for line in [
            &b"{\"id\":\"a\"}"[..],
            b"{\"text\":\"x\"}",
            b"{\"id\":\"a\",\"text\":\"\"}",
            b"{\"id\":\"a\",\"text\":\" \\n\\t\"}",
            b"{\"id\":\"a\",\"text\":\"\\u3000\\u00a0\\u001f\"}",
            b"{\"id\":\"a\",\"text\":\"\\ud800x\"}",
            b"{\"id\":\"a\",\"text\":1}",
            b"{\"id\":\"a\",\"text\":null}",
            b"{\"id\":\"\",\"text\":\"x\"}",
            b"{\"id\":\"123456789\",\"text\":\"x\"}",
            b"{\"id\":\"\\u0061\",\"text\":\"x\"}",
            b"{\"id\":-0,\"text\":\"x\"}",
            b"{\"id\":1.5,\"text\":\"x\"}",
            b"{\"id\":true,\"text\":\"x\"}",
            b"{\"id\":\"a\",\"text\":\"x\",\"text\":\"y\"}",
            b"{\"id\":\"a\",\"text\":\"x\"",
        ] {
            assert!(text_line(line, &wanted()).is_none(), "{line:?}");
        }
    }

    #[test]
    fn packed_texts_are_cut_and_the_others_left_to_python() {
        let data = "ab \u{3000}\u{1c}c\u{e9}".as_bytes();
        let (found, others) = packed_texts(data, &[0, 2, 2, 3, 6, 7, 8, 10]).unwrap();
        assert_eq!(found, vec![(0, "ab"), (5, "c"), (6, "\u{e9}")]);
        assert_eq!(others, vec![1, 2, 3, 4]);
        let (_, others) = packed_texts(b"a\xffb", &[0, 1, 2, 3]).unwrap();
        assert_eq!(others, vec![1]);
        assert!(packed_texts(b"abc", &[0, 4]).is_none());
        assert!(packed_texts(b"abc", &[2, 1]).is_none());
        assert_eq!(packed_texts(b"", &[0]), Some((vec![], vec![])));
    }

    #[test]
    fn lines_are_split_into_plain_ones_and_the_rest() {
        let lines: [&[u8]; 3] = [
            b"{\"id\":\"a\",\"text\":\"x\"}",
            b"{}",
            b"{\"id\":7,\"text\":\"y z\"}",
        ];
        let (found, others) = read_text_lines(lines, &wanted());
        let found: Vec<(&str, &str)> = found.iter().map(|(id, text)| (*id, &**text)).collect();
        assert_eq!((found, others), (vec![("a", "x"), ("7", "y z")], vec![1]));
    }
}
