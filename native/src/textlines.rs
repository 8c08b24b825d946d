//! Lines of texts (`{"id": "...", "text": "..."}`) read and fingerprinted without building objects.
//!
//! Only the plain shape is read here: a flat JSON object (`flatjson`) whose id is a string without
//! escapes or an integer, and whose text is a string that is not blank and holds no lone surrogate.
//! Every other line is left to the pure reader, so its records and error messages stay the only ones
//! there are; for the lines read here, the ids and texts are the ones Python's json gives, and the
//! fingerprints those of `Engine.fingerprint_many` of the texts.

use std::borrow::Cow;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};

use crate::engine::{self, Job};
use crate::flatjson::{text_of, two_fields, Value};
use crate::pyglue::{type_error, type_name, PyNormalizer, TableNormalizer};
use crate::{chunk_size, stop_to_err, to_int, Engine};

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

/// The ids and fingerprints of the lines of the plain shape, and the positions of the others (for the
/// pure reader), in input order: `(ids, fingerprints, others)`.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn fingerprint_text_lines<'py>(
    py: Python<'py>,
    engine: &Bound<'py, Engine>,
    raws: &Bound<'py, PyList>,
    id_field: &str,
    text_field: &str,
    max_id: usize,
    chunk_chars: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>, Vec<usize>)> {
    let chunk = chunk_size(chunk_chars)?;
    let engine = engine.get();
    let lines = raws
        .iter()
        .map(|raw| {
            raw.cast_into::<PyBytes>().map_err(|err| {
                let found = type_name(err.into_inner().as_any());
                type_error(py, format!("lines must be bytes, got {found}"))
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    let slices: Vec<&[u8]> = lines.iter().map(|line| line.as_bytes()).collect();
    let wanted = Wanted {
        id_field: id_field.as_bytes(),
        text_field: text_field.as_bytes(),
        max_id,
    };
    let unicode = engine.unicode.get();
    let (cfg, state) = (&engine.cfg, &unicode.state);
    let (found, jobs, detached) = py.detach(|| {
        let mut found = Vec::with_capacity(slices.len());
        let mut jobs = Vec::with_capacity(slices.len());
        for (position, line) in slices.iter().enumerate() {
            if let Some((id, text)) = text_line(line, &wanted) {
                found.push((position, id));
                jobs.push(Job::Text(text));
            }
        }
        let detached = engine::fingerprint_all(cfg, &jobs, chunk, &mut TableNormalizer::new(state));
        (found, jobs, detached)
    });
    let mut normalizer = PyNormalizer::new(py, unicode);
    let ids = PyList::empty(py);
    let fps = PyList::empty(py);
    let mut others = Vec::with_capacity(slices.len() - found.len());
    let mut next = 0;
    for (((position, id), job), result) in found.into_iter().zip(&jobs).zip(detached) {
        others.extend(next..position);
        next = position + 1;
        let value = match result {
            Ok(value) => value,
            // Text the tables alone do not normalise: again, with Python's help.
            Err(_) => engine::fingerprint(cfg, job, chunk, &mut normalizer).map_err(stop_to_err)?,
        };
        ids.append(PyString::new(py, id))?;
        fps.append(to_int(py, value)?)?;
    }
    others.extend(next..slices.len());
    Ok((ids, fps, others))
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
}
