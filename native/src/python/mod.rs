//! The Python boundary of the crate, and the only module that knows Python: the extension module
//! `simhash_redis_native`, argument checks and conversions, and the translation of the compute
//! modules' `Error` into the exceptions the adapter expects. Everything else in the crate takes and
//! returns plain Rust types and never calls into Python.
//!
//! No panic reaches Python as anything but an exception: PyO3 catches a panic at every entry point
//! and raises `PanicException`; the compute code is written not to panic (checked indexing, no
//! unwrap on input).

mod engine;
mod lane;
mod odd;
mod packing;
mod stored;
mod unicode;

use std::borrow::Cow;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyInt, PyList, PyString, PyTuple, PyType};

use crate::error::Error;
use crate::lines::{read_lines, Wanted};
use crate::tokenize::replace_surrogates;
use crate::{candidates, setreplies};

/// The exception types raised for bad arguments: (value error, type error).
static ERROR_TYPES: PyOnceLock<(Py<PyType>, Py<PyType>)> = PyOnceLock::new();

/// A bad-value error with a message (`InvalidArgument` once the adapter has set the types).
fn value_error(py: Python<'_>, message: String) -> PyErr {
    match ERROR_TYPES.get(py) {
        Some((value, _)) => PyErr::from_type(value.bind(py).clone(), message),
        None => PyValueError::new_err(message),
    }
}

/// A wrong-type error with a message (`InvalidType` once the adapter has set the types).
fn type_error(py: Python<'_>, message: String) -> PyErr {
    match ERROR_TYPES.get(py) {
        Some((_, type_err)) => PyErr::from_type(type_err.bind(py).clone(), message),
        None => PyTypeError::new_err(message),
    }
}

/// The compute modules' errors as the exceptions of the adapter.
trait Raise<T> {
    fn raise(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> Raise<T> for Result<T, Error> {
    fn raise(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|err| match err {
            Error::Value(message) => value_error(py, message),
        })
    }
}

/// `type(obj).__name__`.
fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|_| String::from("?"))
}

/// The text of a str (surrogates replaced by U+FFFD) or of UTF-8 bytes (invalid sequences replaced
/// as `bytes.decode("utf-8", "replace")` does), borrowed when possible.
fn text_of<'a>(obj: &'a Bound<'_, PyAny>) -> PyResult<Option<Cow<'a, str>>> {
    if let Ok(text) = obj.cast::<PyString>() {
        return Ok(Some(match text.to_str() {
            Ok(s) => Cow::Borrowed(s),
            Err(_) => {
                let raw = text.call_method1("encode", ("utf-8", "surrogatepass"))?;
                let raw = raw.cast::<PyBytes>()?;
                Cow::Owned(replace_surrogates(raw.as_bytes()))
            }
        }));
    }
    if let Ok(data) = obj.cast::<PyBytes>() {
        return Ok(Some(match std::str::from_utf8(data.as_bytes()) {
            Ok(s) => Cow::Borrowed(s),
            Err(_) => {
                let decoded = data.call_method1("decode", ("utf-8", "replace"))?;
                let decoded = decoded.cast::<PyString>()?;
                Cow::Owned(decoded.to_str()?.to_owned())
            }
        }));
    }
    Ok(None)
}

/// A fingerprint as a Python int.
fn to_int(py: Python<'_>, value: u128) -> PyResult<Bound<'_, PyAny>> {
    match u64::try_from(value) {
        Ok(small) => Ok(small.into_pyobject(py)?.into_any()),
        Err(_) => Ok(value.into_pyobject(py)?.into_any()),
    }
}

/// `max(1, CHUNK_CHARS)` as a size: any int, saturated.
fn chunk_size(chunk_chars: &Bound<'_, PyAny>) -> PyResult<usize> {
    match chunk_chars.extract::<i64>() {
        Ok(value) => Ok(usize::try_from(value.max(1)).unwrap_or(usize::MAX)),
        Err(err) => match chunk_chars.gt(0) {
            Ok(true) if chunk_chars.is_instance_of::<PyInt>() => Ok(usize::MAX),
            Ok(false) if chunk_chars.is_instance_of::<PyInt>() => Ok(1),
            _ => Err(err),
        },
    }
}

/// Check that every item of a token list is a str; the message names the document.
fn str_items<'py>(items: &Bound<'py, PyAny>, name: &str) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let py = items.py();
    let items: Vec<Bound<'py, PyAny>> = if let Ok(list) = items.cast::<PyList>() {
        list.iter().collect()
    } else if let Ok(tuple) = items.cast::<PyTuple>() {
        tuple.iter().collect()
    } else {
        return Err(type_error(
            py,
            format!(
                "{name} must be a list or tuple of str tokens, got {}",
                type_name(items)
            ),
        ));
    };
    if let Some(bad) = items.iter().find(|item| !item.is_instance_of::<PyString>()) {
        return Err(type_error(
            py,
            format!("{name} must hold str tokens only, got {}", type_name(bad)),
        ));
    }
    Ok(items)
}

/// The items of a list, each bytes: else the wrong-type error `"{what}, got {type}"`.
fn bytes_items<'py>(items: &Bound<'py, PyList>, what: &str) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    items
        .iter()
        .map(|item| {
            item.cast_into::<PyBytes>().map_err(|err| {
                let found = type_name(err.into_inner().as_any());
                type_error(items.py(), format!("{what}, got {found}"))
            })
        })
        .collect()
}

/// Raise the wrong-type error unless every token is a str (the check of a token document).
#[pyfunction]
fn check_tokens(tokens: &Bound<'_, PyAny>, name: &str) -> PyResult<()> {
    str_items(tokens, name).map(|_| ())
}

/// The candidate filters' refusal of queries without tables.
fn check_tables(py: Python<'_>, tables: usize) -> PyResult<()> {
    if tables == 0 {
        return Err(value_error(py, String::from("tables must be at least 1")));
    }
    Ok(())
}

/// A query of the candidate filters as a number (below 2^128: the Python wrappers check it).
fn query_fingerprint(fp: &Bound<'_, PyAny>) -> PyResult<u128> {
    match fp.extract::<u64>() {
        Ok(small) => Ok(u128::from(small)),
        Err(_) => fp.extract(),
    }
}

/// `store.candidates.pure_hits`: for each query, {stored value: (fingerprint, distance)} of its
/// candidates within distance k. Plain decimal bytes are decoded here (against `k_fast`, k clamped to
/// -1..=129); any other member goes through `slow(raw, fp)`, which returns `(fingerprint, distance)`
/// or raises as `int()` does, and is compared with k itself.
#[pyfunction]
#[pyo3(signature = (fps, replies, tables, k_fast, k, wrap64, slow))]
#[allow(clippy::too_many_arguments)] // the Python function's signature
fn hits<'py>(
    py: Python<'py>,
    fps: &Bound<'py, PyList>,
    replies: &Bound<'py, PyList>,
    tables: usize,
    k_fast: i64,
    k: &Bound<'py, PyAny>,
    wrap64: bool,
    slow: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyList>> {
    check_tables(py, tables)?;
    let out = PyList::empty(py);
    let total = replies.len();
    for (q, fp_obj) in fps.iter().enumerate() {
        let fp = query_fingerprint(&fp_obj)?;
        let found = PyDict::new(py);
        let start = q.saturating_mul(tables);
        let end = start.saturating_add(tables).min(total);
        for index in start..end {
            let raws = replies.get_item(index)?;
            let visit = |raw: Bound<'py, PyAny>| -> PyResult<()> {
                if let Ok(data) = raw.cast_exact::<PyBytes>() {
                    if let Some((candidate, d)) = candidates::candidate(data.as_bytes(), fp, wrap64)
                    {
                        if i64::from(d) <= k_fast && !found.contains(&raw)? {
                            found.set_item(&raw, (to_int(py, candidate)?, d))?;
                        }
                        return Ok(());
                    }
                }
                if found.contains(&raw)? {
                    return Ok(());
                }
                let pair = slow.call1((&raw, &fp_obj))?;
                let d: Bound<'py, PyAny> = pair.get_item(1)?;
                if d.le(k)? {
                    found.set_item(&raw, pair)?;
                }
                Ok(())
            };
            if let Ok(list) = raws.cast::<PyList>() {
                for raw in list.iter() {
                    visit(raw)?;
                }
            } else {
                for raw in raws.try_iter()? {
                    visit(raw?)?;
                }
            }
        }
        out.append(found)?;
    }
    Ok(out)
}

/// `hits` over replies `scan_sets` found whole: for each query, {stored value: (fingerprint,
/// distance)} of the candidates within k in its `tables` replies.
///
/// Plain decimals are filtered here; any other member goes through `slow(raw, fp)` as in `hits`.
#[pyfunction]
#[pyo3(signature = (fps, data, tables, k_fast, k, wrap64, slow))]
#[allow(clippy::too_many_arguments)] // the Python function's signature
fn hits_in_sets<'py>(
    py: Python<'py>,
    fps: &Bound<'py, PyList>,
    data: &[u8],
    tables: usize,
    k_fast: i64,
    k: &Bound<'py, PyAny>,
    wrap64: bool,
    slow: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyList>> {
    check_tables(py, tables)?;
    let out = PyList::empty(py);
    let mut pos = 0;
    for fp_obj in fps.iter() {
        let fp = query_fingerprint(&fp_obj)?;
        let found = PyDict::new(py);
        for _ in 0..tables {
            let mut failure: Option<PyErr> = None;
            let next = setreplies::members(data, pos, |raw| {
                if failure.is_none() {
                    if let Err(err) = visit(py, &found, raw, fp, &fp_obj, k_fast, k, wrap64, slow) {
                        failure = Some(err);
                    }
                }
            });
            if let Some(err) = failure {
                return Err(err);
            }
            pos = next.ok_or_else(|| {
                value_error(py, String::from("replies are not whole sets of strings"))
            })?;
        }
        out.append(found)?;
    }
    Ok(out)
}

/// One member of a query's sets into its hits (`hits`' rule, with the bytes object made only when kept).
#[allow(clippy::too_many_arguments)]
fn visit<'py>(
    py: Python<'py>,
    found: &Bound<'py, PyDict>,
    raw: &[u8],
    fp: u128,
    fp_obj: &Bound<'py, PyAny>,
    k_fast: i64,
    k: &Bound<'py, PyAny>,
    wrap64: bool,
    slow: &Bound<'py, PyAny>,
) -> PyResult<()> {
    if let Some((candidate, d)) = candidates::candidate(raw, fp, wrap64) {
        if i64::from(d) <= k_fast {
            let key = PyBytes::new(py, raw);
            if !found.contains(&key)? {
                found.set_item(key, (to_int(py, candidate)?, d))?;
            }
        }
        return Ok(());
    }
    let key = PyBytes::new(py, raw);
    if found.contains(&key)? {
        return Ok(());
    }
    let pair = slow.call1((&key, fp_obj))?;
    let d: Bound<'py, PyAny> = pair.get_item(1)?;
    if d.le(k)? {
        found.set_item(key, pair)?;
    }
    Ok(())
}

/// How far whole replies of the plain shape reach from `pos`, up to `want` of them: the position
/// after the last whole one, how many there are, and whether the next reply is of another shape.
#[pyfunction]
fn scan_sets(data: &[u8], pos: usize, want: usize) -> (usize, usize, bool) {
    setreplies::scan(data, pos, want)
}

/// The value of each of `fields` in one HGETALL reply in its RESP form, None where the field is
/// absent.
#[pyfunction]
fn hash_values<'py>(
    py: Python<'py>,
    data: &[u8],
    fields: Vec<Vec<u8>>,
) -> PyResult<Bound<'py, PyList>> {
    let values = setreplies::hash_fields(data, &fields).raise(py)?;
    PyList::new(
        py,
        values
            .into_iter()
            .map(|value| value.map(|value| PyBytes::new(py, value))),
    )
}

/// The ids and fingerprints of the lines of the plain shape, and the positions of the others (for the
/// pure reader), in input order: `(ids, fingerprints, others)`.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn fingerprint_lines<'py>(
    py: Python<'py>,
    raws: Bound<'py, PyList>,
    id_field: &str,
    fp_field: &str,
    f: u32,
    base: &str,
    max_id: usize,
) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>, Vec<usize>)> {
    let wanted =
        Wanted::new(id_field.as_bytes(), fp_field.as_bytes(), f, base, max_id).raise(py)?;
    let lines = bytes_items(&raws, "lines must be bytes")?;
    let (found, others) = read_lines(lines.iter().map(|line| line.as_bytes()), &wanted);
    let ids = PyList::empty(py);
    let fps = PyList::empty(py);
    for (id, fp) in found {
        ids.append(PyString::new(py, id))?;
        fps.append(to_int(py, fp)?)?;
    }
    Ok((ids, fps, others))
}

/// Make bad arguments raise these types (the project's InvalidArgument and InvalidType) instead of
/// ValueError and TypeError; returns False when types were set already.
#[pyfunction]
fn set_error_types(
    py: Python<'_>,
    value_error: Bound<'_, PyType>,
    type_error: Bound<'_, PyType>,
) -> bool {
    ERROR_TYPES
        .set(py, (value_error.unbind(), type_error.unbind()))
        .is_ok()
}

/// The compiled core of simhash-redis.
#[pymodule]
fn simhash_redis_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<unicode::Unicode>()?;
    m.add_class::<engine::Engine>()?;
    m.add_class::<engine::MinHash>()?;
    m.add_class::<odd::OddSketch>()?;
    m.add_class::<lane::Lane>()?;
    m.add_function(wrap_pyfunction!(check_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(hits, m)?)?;
    m.add_function(wrap_pyfunction!(odd::odd_estimate, m)?)?;
    m.add_function(wrap_pyfunction!(scan_sets, m)?)?;
    m.add_function(wrap_pyfunction!(hash_values, m)?)?;
    m.add_function(wrap_pyfunction!(hits_in_sets, m)?)?;
    m.add_class::<packing::GroupedCommands>()?;
    m.add_class::<packing::AttachCalls>()?;
    m.add_class::<packing::ScriptRuns>()?;
    m.add_function(wrap_pyfunction!(packing::pack_column, m)?)?;
    m.add_function(wrap_pyfunction!(packing::unpack_column, m)?)?;
    m.add_function(wrap_pyfunction!(packing::column_buckets, m)?)?;
    m.add_function(wrap_pyfunction!(fingerprint_lines, m)?)?;
    m.add_function(wrap_pyfunction!(engine::fingerprint_text_lines, m)?)?;
    m.add_function(wrap_pyfunction!(engine::fingerprint_packed_texts, m)?)?;
    m.add_function(wrap_pyfunction!(stored::fingerprint_stored_many, m)?)?;
    m.add_function(wrap_pyfunction!(stored::sketch_text_lines, m)?)?;
    m.add_function(wrap_pyfunction!(set_error_types, m)?)?;
    m.add("TOKENS", engine::TOKENS)?;
    m.add("WEIGHTED", engine::WEIGHTED)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
