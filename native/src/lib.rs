//! `simhash_redis_native`: the compiled core of simhash-redis, bit for bit with the pure engine.
//!
//! This file is the Python boundary only: argument checks and conversions, and the split of batch
//! work into a part detached from Python (ASCII text, and text the Unicode tables normalise alone)
//! and a part attached to it (text that needs `unicodedata`). The work itself is in the other modules.

#![forbid(unsafe_code)]

mod candidates;
mod engine;
mod flatjson;
mod hash;
mod lines;
mod minhash;
mod packing;
mod pyglue;
mod resp;
mod setreplies;
mod sums;
mod textlines;
mod tokenize;
mod unicode;

use std::borrow::Cow;
use std::collections::HashSet;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple, PyType};

use engine::{Config, Job, Kind, Stop};
use minhash::{MinJob, Sketcher};
use pyglue::{text_of, type_error, type_name, value_error, PyNormalizer, TableNormalizer, Unicode};

/// Texts of at least this many bytes are first tried detached from Python, even alone.
const DETACH_BYTES: usize = 1 << 16;
/// Tag of a prepared token document: `(TOKENS, tokens, name)`.
const TOKENS: u8 = 0;
/// Tag of a prepared weighted document: `(WEIGHTED, names, weights)`.
const WEIGHTED: u8 = 1;

fn stop_to_err(stop: Stop) -> PyErr {
    match stop {
        Stop::Error(err) => err,
        Stop::NeedPython => PyRuntimeError::new_err("internal error: normalisation needs Python"),
    }
}

/// A fingerprint as a Python int.
pub(crate) fn to_int(py: Python<'_>, value: u128) -> PyResult<Bound<'_, PyAny>> {
    match u64::try_from(value) {
        Ok(small) => Ok(small.into_pyobject(py)?.into_any()),
        Err(_) => Ok(value.into_pyobject(py)?.into_any()),
    }
}

/// The objects a document refers to, kept alive while its text is borrowed.
enum DocRef<'py> {
    Text(Bound<'py, PyAny>),
    Tokens(Vec<Bound<'py, PyAny>>),
    Weighted(Vec<Bound<'py, PyAny>>, Vec<f64>),
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

impl<'py> DocRef<'py> {
    /// A document as the adapter prepares it: str, bytes, `(TOKENS, tokens, name)` or
    /// `(WEIGHTED, names, weights)`.
    fn parse(doc: Bound<'py, PyAny>) -> PyResult<Self> {
        let py = doc.py();
        if doc.is_instance_of::<PyString>() || doc.is_instance_of::<PyBytes>() {
            return Ok(DocRef::Text(doc));
        }
        let Ok(tuple) = doc.cast::<PyTuple>() else {
            return Err(type_error(
                py,
                format!(
                    "a document must be str, bytes or a prepared tuple, got {}",
                    type_name(&doc)
                ),
            ));
        };
        let tag: u8 = tuple.get_item(0)?.extract()?;
        match (tag, tuple.len()) {
            (TOKENS, 3) => {
                let name: String = tuple.get_item(2)?.extract()?;
                Ok(DocRef::Tokens(str_items(&tuple.get_item(1)?, &name)?))
            }
            (WEIGHTED, 3) => {
                let names = str_items(&tuple.get_item(1)?, "weighted features")?;
                let weights: Vec<f64> = tuple.get_item(2)?.extract()?;
                if names.len() != weights.len() {
                    return Err(value_error(
                        py,
                        String::from("weighted features need one weight per name"),
                    ));
                }
                Ok(DocRef::Weighted(names, weights))
            }
            _ => Err(value_error(
                py,
                format!("unknown prepared document tag {tag}"),
            )),
        }
    }

    /// The job, borrowing the texts.
    fn job(&self, kind: Kind) -> PyResult<Job<'_>> {
        Ok(match self {
            DocRef::Text(obj) => Job::Text(text_of(obj)?.unwrap_or_default()),
            DocRef::Tokens(items) => {
                let tokens = items
                    .iter()
                    .map(|t| Ok(text_of(t)?.unwrap_or_default()))
                    .collect::<PyResult<Vec<_>>>()?;
                if kind == Kind::Chars {
                    Job::Whole(Cow::Owned(tokens.join(" ")))
                } else {
                    Job::Tokens(tokens)
                }
            }
            DocRef::Weighted(names, weights) => Job::Weighted(
                names
                    .iter()
                    .zip(weights)
                    .map(|(name, &w)| Ok((text_of(name)?.unwrap_or_default(), w)))
                    .collect::<PyResult<Vec<_>>>()?,
            ),
        })
    }
}

/// `max(1, CHUNK_CHARS)` as a size: any int, saturated.
fn chunk_size(chunk_chars: &Bound<'_, PyAny>) -> PyResult<usize> {
    match chunk_chars.extract::<i64>() {
        Ok(value) => Ok(usize::try_from(value.max(1)).unwrap_or(usize::MAX)),
        Err(err) => match chunk_chars.gt(0) {
            Ok(true) if chunk_chars.is_instance_of::<pyo3::types::PyInt>() => Ok(usize::MAX),
            Ok(false) if chunk_chars.is_instance_of::<pyo3::types::PyInt>() => Ok(1),
            _ => Err(err),
        },
    }
}

fn job_bytes(job: &Job<'_>) -> usize {
    match job {
        Job::Text(t) | Job::Whole(t) => t.len(),
        Job::Tokens(tokens) => tokens.iter().map(|t| t.len() + 1).sum(),
        Job::Weighted(items) => items.len(),
    }
}

/// The fingerprint engine of one scheme.
#[pyclass(frozen, module = "simhash_redis_native")]
struct Engine {
    cfg: Config,
    unicode: Py<Unicode>,
}

#[pymethods]
impl Engine {
    /// An engine for a validated scheme: features ("shingles", "words", "chars"), n (1-16), f (32,
    /// 64, 128), binary weighting or tf, the xxh3 seed and the normalised stopwords.
    #[new]
    #[pyo3(signature = (unicode, features, n, f, binary, seed, stopwords))]
    #[allow(clippy::too_many_arguments)] // the Python constructor's signature
    fn new(
        py: Python<'_>,
        unicode: Py<Unicode>,
        features: &str,
        n: usize,
        f: u32,
        binary: bool,
        seed: u64,
        stopwords: Vec<String>,
    ) -> PyResult<Self> {
        let kind = match features {
            "shingles" => Kind::Shingles,
            "words" => Kind::Words,
            "chars" => Kind::Chars,
            other => {
                return Err(value_error(
                    py,
                    format!("features must be one of 'chars', 'shingles', 'words', got {other:?}"),
                ))
            }
        };
        if !(1..=16).contains(&n) {
            return Err(value_error(
                py,
                format!("n must be between 1 and 16, got {n}"),
            ));
        }
        if ![32, 64, 128].contains(&f) {
            return Err(value_error(
                py,
                format!("f must be one of (32, 64, 128), got {f}"),
            ));
        }
        let n = if kind == Kind::Words { 1 } else { n };
        let stop: HashSet<Vec<u8>> = stopwords.into_iter().map(String::into_bytes).collect();
        Ok(Engine {
            cfg: Config {
                kind,
                n,
                f,
                binary,
                seed,
                stop,
            },
            unicode,
        })
    }

    /// The fingerprint of one document: str, bytes, `(0, tokens, name)` or `(1, names, weights)`.
    fn fingerprint<'py>(
        &self,
        py: Python<'py>,
        doc: Bound<'py, PyAny>,
        chunk_chars: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let chunk = chunk_size(chunk_chars)?;
        let doc = DocRef::parse(doc)?;
        let job = doc.job(self.cfg.kind)?;
        let unicode = self.unicode.get();
        if job_bytes(&job) >= DETACH_BYTES {
            let state = &unicode.state;
            let cfg = &self.cfg;
            let detached = py
                .detach(|| engine::fingerprint(cfg, &job, chunk, &mut TableNormalizer::new(state)));
            if let Ok(value) = detached {
                return to_int(py, value);
            }
        }
        let value =
            engine::fingerprint(&self.cfg, &job, chunk, &mut PyNormalizer::new(py, unicode))
                .map_err(stop_to_err)?;
        to_int(py, value)
    }

    /// The fingerprints of prepared documents, computed detached from Python where possible.
    fn fingerprint_many<'py>(
        &self,
        py: Python<'py>,
        docs: &Bound<'py, PyList>,
        chunk_chars: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let chunk = chunk_size(chunk_chars)?;
        let refs = docs
            .iter()
            .map(DocRef::parse)
            .collect::<PyResult<Vec<_>>>()?;
        let jobs = refs
            .iter()
            .map(|r| r.job(self.cfg.kind))
            .collect::<PyResult<Vec<_>>>()?;
        let unicode = self.unicode.get();
        let state = &unicode.state;
        let cfg = &self.cfg;
        let detached = py.detach(|| {
            engine::fingerprint_all(cfg, &jobs, chunk, &mut TableNormalizer::new(state))
        });
        let mut normalizer = PyNormalizer::new(py, unicode);
        let out = PyList::empty(py);
        for (job, result) in jobs.iter().zip(detached) {
            let value = match result {
                Ok(value) => value,
                Err(_) => {
                    engine::fingerprint(cfg, job, chunk, &mut normalizer).map_err(stop_to_err)?
                }
            };
            out.append(to_int(py, value)?)?;
        }
        Ok(out)
    }

    /// Whether the scheme's fingerprints are 128 bits wide.
    #[getter]
    fn f(&self) -> u32 {
        self.cfg.f
    }
}

/// Raise the wrong-type error unless every token is a str (the check of a token document).
#[pyfunction]
fn check_tokens(tokens: &Bound<'_, PyAny>, name: &str) -> PyResult<()> {
    str_items(tokens, name).map(|_| ())
}

/// A MinHash document: str, bytes, or a list or tuple of str tokens.
enum MinRef<'py> {
    Text(Bound<'py, PyAny>),
    Tokens(Vec<Bound<'py, PyAny>>),
}

impl<'py> MinRef<'py> {
    fn parse(doc: Bound<'py, PyAny>, name: &str) -> PyResult<Self> {
        if doc.is_instance_of::<PyString>() || doc.is_instance_of::<PyBytes>() {
            return Ok(MinRef::Text(doc));
        }
        if doc.is_instance_of::<PyList>() || doc.is_instance_of::<PyTuple>() {
            return Ok(MinRef::Tokens(str_items(&doc, name)?));
        }
        Err(type_error(
            doc.py(),
            format!(
                "{name} must be a str, bytes or a sequence of str tokens, got {}",
                type_name(&doc)
            ),
        ))
    }

    fn job(&self) -> PyResult<MinJob<'_>> {
        Ok(match self {
            MinRef::Text(obj) => MinJob::Text(text_of(obj)?.unwrap_or_default()),
            MinRef::Tokens(items) => MinJob::Tokens(
                items
                    .iter()
                    .map(|t| Ok(text_of(t)?.unwrap_or_default()))
                    .collect::<PyResult<Vec<_>>>()?,
            ),
        })
    }
}

/// The sketches of a `MinHasher`.
#[pyclass(frozen, module = "simhash_redis_native")]
struct MinHash {
    sketcher: Sketcher,
    unicode: Py<Unicode>,
}

fn u64_array(py: Python<'_>, data: &[u8], count: usize, name: &str) -> PyResult<Vec<u64>> {
    if data.len() != 8 * count {
        return Err(value_error(
            py,
            format!(
                "{name} must hold {count} little-endian uint64, got {} bytes",
                data.len()
            ),
        ));
    }
    Ok(data
        .chunks_exact(8)
        .map(|c| {
            let mut word = [0u8; 8];
            word.copy_from_slice(c);
            u64::from_le_bytes(word)
        })
        .collect())
}

#[pymethods]
impl MinHash {
    /// A sketcher for `MinHasher(num_perm, bits, n, seed)`, given its permutations `a` and `b` as
    /// little-endian uint64 bytes.
    #[new]
    #[pyo3(signature = (unicode, num_perm, bits, n, seed, a, b))]
    #[allow(clippy::too_many_arguments)] // the Python constructor's signature
    fn new(
        py: Python<'_>,
        unicode: Py<Unicode>,
        num_perm: usize,
        bits: u32,
        n: usize,
        seed: u64,
        a: &Bound<'_, PyBytes>,
        b: &Bound<'_, PyBytes>,
    ) -> PyResult<Self> {
        if !(16..=4096).contains(&num_perm) {
            return Err(value_error(
                py,
                format!("num_perm must be in 16..4096, got {num_perm}"),
            ));
        }
        if bits != 8 && bits != 16 {
            return Err(value_error(
                py,
                format!("bits must be one of (8, 16), got {bits}"),
            ));
        }
        if !(1..=16).contains(&n) {
            return Err(value_error(py, format!("n must be in 1..16, got {n}")));
        }
        let a = u64_array(py, a.as_bytes(), num_perm, "a")?;
        let b = u64_array(py, b.as_bytes(), num_perm, "b")?;
        Ok(MinHash {
            sketcher: Sketcher {
                n,
                seed,
                bits,
                a,
                b,
            },
            unicode,
        })
    }

    /// The sketch of one document (str, bytes, or a list or tuple of str tokens); `name` is used in
    /// messages.
    #[pyo3(signature = (doc, name = "doc"))]
    fn sketch<'py>(
        &self,
        py: Python<'py>,
        doc: Bound<'py, PyAny>,
        name: &str,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let doc = MinRef::parse(doc, name)?;
        let job = doc.job()?;
        let unicode = self.unicode.get();
        let sketch = self
            .sketcher
            .sketch(&job, &mut PyNormalizer::new(py, unicode))
            .map_err(stop_to_err)?;
        Ok(PyBytes::new(py, &sketch))
    }

    /// The sketches of many documents, computed detached from Python where possible.
    fn sketch_many<'py>(
        &self,
        py: Python<'py>,
        docs: &Bound<'py, PyList>,
    ) -> PyResult<Bound<'py, PyList>> {
        let refs = docs
            .iter()
            .enumerate()
            .map(|(i, doc)| MinRef::parse(doc, &format!("docs[{i}]")))
            .collect::<PyResult<Vec<_>>>()?;
        let jobs = refs.iter().map(MinRef::job).collect::<PyResult<Vec<_>>>()?;
        let unicode = self.unicode.get();
        let state = &unicode.state;
        let sketcher = &self.sketcher;
        let detached: Vec<Option<Vec<u8>>> = py.detach(|| {
            let mut normalizer = TableNormalizer::new(state);
            jobs.iter()
                .map(|job| sketcher.sketch(job, &mut normalizer).ok())
                .collect()
        });
        let mut normalizer = PyNormalizer::new(py, unicode);
        let out = PyList::empty(py);
        for (job, result) in jobs.iter().zip(detached) {
            let sketch = match result {
                Some(sketch) => sketch,
                None => sketcher.sketch(job, &mut normalizer).map_err(stop_to_err)?,
            };
            out.append(PyBytes::new(py, &sketch))?;
        }
        Ok(out)
    }

    /// `MinHasher.estimate` of two sketches of the right length.
    fn estimate(
        &self,
        py: Python<'_>,
        a: &Bound<'_, PyBytes>,
        b: &Bound<'_, PyBytes>,
    ) -> PyResult<f64> {
        let size = self.sketcher.a.len() * self.sketcher.bits as usize / 8;
        for sketch in [a, b] {
            if sketch.as_bytes().len() != size {
                return Err(value_error(
                    py,
                    format!(
                        "a sketch must be {size} bytes, got {}",
                        sketch.as_bytes().len()
                    ),
                ));
            }
        }
        Ok(minhash::estimate(
            a.as_bytes(),
            b.as_bytes(),
            self.sketcher.bits,
        ))
    }
}

/// `index._hits_scalar`: for each query, {stored value: (fingerprint, distance)} of its candidates
/// within distance k. Plain decimal bytes are decoded here (against `k_fast`, k clamped to -1..=129);
/// any other member goes through `slow(raw, fp)`, which returns `(fingerprint, distance)` or raises as
/// `int()` does, and is compared with k itself.
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

/// The candidate filters' refusal of queries without tables.
pub(crate) fn check_tables(py: Python<'_>, tables: usize) -> PyResult<()> {
    if tables == 0 {
        return Err(value_error(py, String::from("tables must be at least 1")));
    }
    Ok(())
}

/// A query of the candidate filters as a number (below 2^128: the Python wrappers check it).
pub(crate) fn query_fingerprint(fp: &Bound<'_, PyAny>) -> PyResult<u128> {
    match fp.extract::<u64>() {
        Ok(small) => Ok(u128::from(small)),
        Err(_) => fp.extract(),
    }
}

/// Make bad arguments raise these types (the project's InvalidArgument and InvalidType) instead of
/// ValueError and TypeError; returns False when types were set already.
#[pyfunction]
fn set_error_types(
    py: Python<'_>,
    value_error: Bound<'_, PyType>,
    type_error: Bound<'_, PyType>,
) -> bool {
    pyglue::set_error_types(py, value_error, type_error)
}

/// The compiled core of simhash-redis.
#[pymodule]
fn simhash_redis_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Unicode>()?;
    m.add_class::<Engine>()?;
    m.add_class::<MinHash>()?;
    m.add_function(wrap_pyfunction!(check_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(hits, m)?)?;
    m.add_function(wrap_pyfunction!(setreplies::scan_sets, m)?)?;
    m.add_function(wrap_pyfunction!(setreplies::hash_values, m)?)?;
    m.add_function(wrap_pyfunction!(setreplies::hits_in_sets, m)?)?;
    m.add_class::<packing::GroupedCommands>()?;
    m.add_class::<packing::AttachCalls>()?;
    m.add_class::<packing::ScriptRuns>()?;
    m.add_function(wrap_pyfunction!(packing::pack_column, m)?)?;
    m.add_function(wrap_pyfunction!(packing::unpack_column, m)?)?;
    m.add_function(wrap_pyfunction!(packing::column_buckets, m)?)?;
    m.add_function(wrap_pyfunction!(lines::fingerprint_lines, m)?)?;
    m.add_function(wrap_pyfunction!(textlines::fingerprint_text_lines, m)?)?;
    m.add_function(wrap_pyfunction!(set_error_types, m)?)?;
    m.add("TOKENS", TOKENS)?;
    m.add("WEIGHTED", WEIGHTED)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
