//! A verified load's fingerprints and stored sketches as Python functions: texts, or JSON lines read
//! as `fingerprint_text_lines` reads them, through `crate::stored` (one pass a text), run through
//! `Unicode::settle` detached from Python.

use std::borrow::Cow;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use super::engine::{Engine, MinHash};
use super::odd::OddSketch;
use super::{chunk_size, text_of, to_int, type_error, type_name, value_error, Raise};
use crate::stored::fingerprint_and_stored;
use crate::textlines::{read_text_lines, Wanted};

/// `fingerprint_and_stored` of texts (str or UTF-8 bytes) under an engine's scheme and an odd
/// sketcher with its band MinHash, which must share the engine's Unicode rules; detached from Python.
fn stored_of_texts<'py>(
    py: Python<'py>,
    engine: &Engine,
    odd: &OddSketch,
    bands: &MinHash,
    texts: &[Cow<'_, str>],
    chunk: usize,
) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>)> {
    if !engine.unicode.is(&odd.unicode) {
        return Err(value_error(
            py,
            String::from("the engine and the sketcher must share their Unicode rules"),
        ));
    }
    let (cfg, sketcher, minhash) = (&engine.cfg, &odd.sketcher, &bands.sketcher);
    sketcher.banded_check(minhash).raise(py)?;
    let made = engine
        .unicode
        .get()
        .settle(py, texts.len(), true, |i, resolver| {
            texts.get(i).map_or((0, Vec::new()), |text| {
                fingerprint_and_stored(cfg, chunk, sketcher, minhash, text, resolver)
            })
        })?;
    let (fps, sketches) = (PyList::empty(py), PyList::empty(py));
    for (fp, sketch) in made {
        fps.append(to_int(py, fp)?)?;
        sketches.append(PyBytes::new(py, &sketch))?;
    }
    Ok((fps, sketches))
}

/// The fingerprints and stored `BandedOddSketcher` sketches of texts (str or bytes, decoded as the
/// fingerprint engine decodes them), each text normalised and tokenised once where the scheme and the
/// sketcher share their tokens: `(fingerprints, sketches)`, as `Engine.fingerprint_many` and
/// `OddSketch.banded_stored_many` give them.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn fingerprint_stored_many<'py>(
    py: Python<'py>,
    engine: &Bound<'py, Engine>,
    odd: &Bound<'py, OddSketch>,
    bands: PyRef<'py, MinHash>,
    texts: &Bound<'py, PyList>,
    chunk_chars: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>)> {
    let chunk = chunk_size(chunk_chars)?;
    let items: Vec<Bound<'py, PyAny>> = texts.iter().collect();
    let texts = items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            text_of(item)?.ok_or_else(|| {
                type_error(
                    py,
                    format!("texts[{i}] must be str or bytes, got {}", type_name(item)),
                )
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    stored_of_texts(py, engine.get(), odd.get(), &bands, &texts, chunk)
}

/// `fingerprint_text_lines` with each text's stored `BandedOddSketcher` sketch too, as
/// `fingerprint_stored_many` makes them: `(ids, fingerprints, sketches, others)`.
#[pyfunction]
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
pub fn sketch_text_lines<'py>(
    py: Python<'py>,
    engine: &Bound<'py, Engine>,
    odd: &Bound<'py, OddSketch>,
    bands: PyRef<'py, MinHash>,
    raws: &Bound<'py, PyList>,
    id_field: &str,
    text_field: &str,
    max_id: usize,
    chunk_chars: &Bound<'py, PyAny>,
) -> PyResult<(
    Bound<'py, PyList>,
    Bound<'py, PyList>,
    Bound<'py, PyList>,
    Vec<usize>,
)> {
    let chunk = chunk_size(chunk_chars)?;
    let lines = super::bytes_items(raws, "lines must be bytes")?;
    let wanted = Wanted {
        id_field: id_field.as_bytes(),
        text_field: text_field.as_bytes(),
        max_id,
    };
    let slices: Vec<&[u8]> = lines.iter().map(|line| line.as_bytes()).collect();
    let (found, others) = py.detach(|| read_text_lines(slices.iter().copied(), &wanted));
    let (ids, texts): (Vec<&str>, Vec<Cow<'_, str>>) = found.into_iter().unzip();
    let (fps, sketches) = stored_of_texts(py, engine.get(), odd.get(), &bands, &texts, chunk)?;
    Ok((PyList::new(py, ids)?, fps, sketches, others))
}
