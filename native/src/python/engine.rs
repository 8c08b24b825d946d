//! The fingerprint engine and the MinHash sketcher as Python objects: documents as the adapter prepares
//! them are checked and borrowed here, the work is `crate::engine` and `crate::minhash`, run through
//! `Unicode::settle` (detached from Python for batches and long texts).

use std::borrow::Cow;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

use super::unicode::Unicode;
use super::{chunk_size, str_items, text_of, to_int, type_error, type_name, value_error, Raise};
use crate::engine::{self, Config, Job, Kind};
use crate::minhash::{self, MinJob, Sketcher};
use crate::textlines::{packed_texts, read_text_lines, Wanted};

/// Texts of at least this many bytes are computed detached from Python, even alone.
const DETACH_BYTES: usize = 1 << 16;
/// Tag of a prepared token document: `(TOKENS, tokens, name)`.
pub const TOKENS: u8 = 0;
/// Tag of a prepared weighted document: `(WEIGHTED, names, weights)`.
pub const WEIGHTED: u8 = 1;

/// The objects a document refers to, kept alive while its text is borrowed.
enum DocRef<'py> {
    Text(Bound<'py, PyAny>),
    Tokens(Vec<Bound<'py, PyAny>>),
    Weighted(Vec<Bound<'py, PyAny>>, Vec<f64>),
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

fn job_bytes(job: &Job<'_>) -> usize {
    match job {
        Job::Text(t) | Job::Whole(t) => t.len(),
        Job::Tokens(tokens) => tokens.iter().map(|t| t.len() + 1).sum(),
        Job::Weighted(items) => items.len(),
    }
}

/// The fingerprint engine of one scheme.
#[pyclass(frozen, module = "simhash_redis_native")]
pub struct Engine {
    pub(super) cfg: Config,
    pub(super) unicode: Py<Unicode>,
}

impl Engine {
    /// The fingerprints of jobs, in order.
    fn run(
        &self,
        py: Python<'_>,
        jobs: &[Job<'_>],
        chunk: usize,
        detach: bool,
    ) -> PyResult<Vec<u128>> {
        let cfg = &self.cfg;
        self.unicode
            .get()
            .settle(py, jobs.len(), detach, |i, resolver| {
                jobs.get(i)
                    .map_or(0, |job| engine::fingerprint(cfg, job, chunk, resolver))
            })
    }
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
        let cfg = Config::new(features, n, f, binary, seed, stopwords).raise(py)?;
        Ok(Engine { cfg, unicode })
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
        let detach = job_bytes(&job) >= DETACH_BYTES;
        let cfg = &self.cfg;
        let value = self.unicode.get().settle_one(py, detach, |resolver| {
            engine::fingerprint(cfg, &job, chunk, resolver)
        })?;
        to_int(py, value)
    }

    /// The fingerprints of prepared documents, computed detached from Python.
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
        let values = self.run(py, &jobs, chunk, true)?;
        let out = PyList::empty(py);
        for value in values {
            out.append(to_int(py, value)?)?;
        }
        Ok(out)
    }

    /// The fingerprint width.
    #[getter]
    fn f(&self) -> u32 {
        self.cfg.f
    }
}

/// A MinHash document: str, bytes, or a list or tuple of str tokens.
pub(super) enum MinRef<'py> {
    Text(Bound<'py, PyAny>),
    Tokens(Vec<Bound<'py, PyAny>>),
}

impl<'py> MinRef<'py> {
    pub(super) fn parse(doc: Bound<'py, PyAny>, name: &str) -> PyResult<Self> {
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

    pub(super) fn job(&self) -> PyResult<MinJob<'_>> {
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
pub struct MinHash {
    pub(super) sketcher: Sketcher,
    unicode: Py<Unicode>,
}

impl MinHash {
    /// The sketches of jobs, in order.
    fn run(&self, py: Python<'_>, jobs: &[MinJob<'_>], detach: bool) -> PyResult<Vec<Vec<u8>>> {
        let sketcher = &self.sketcher;
        self.unicode
            .get()
            .settle(py, jobs.len(), detach, |i, resolver| {
                jobs.get(i)
                    .map(|job| sketcher.sketch(job, resolver))
                    .unwrap_or_default()
            })
    }
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
        let sketcher =
            Sketcher::new(num_perm, bits, n, seed, a.as_bytes(), b.as_bytes()).raise(py)?;
        Ok(MinHash { sketcher, unicode })
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
        let sketcher = &self.sketcher;
        let sketch = self
            .unicode
            .get()
            .settle_one(py, false, |resolver| sketcher.sketch(&job, resolver))?;
        Ok(PyBytes::new(py, &sketch))
    }

    /// The sketches of many documents, computed detached from Python.
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
        let out = PyList::empty(py);
        for sketch in self.run(py, &jobs, true)? {
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
        let size = self.sketcher.sketch_bytes();
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

/// The fingerprints of texts laid end to end in `data` (an Arrow string column's values, from its
/// first text's start), cut at `offsets` (the column's own: native-endian integers of 64 bits when
/// `wide`, else 32, one more than there are texts), of those valid in UTF-8 and surely not blank,
/// and the positions of the others (for the pure reader): `(fingerprints, others)`.
#[pyfunction]
pub fn fingerprint_packed_texts<'py>(
    py: Python<'py>,
    engine: &Bound<'py, Engine>,
    data: &Bound<'py, PyBytes>,
    offsets: &Bound<'py, PyBytes>,
    wide: bool,
    chunk_chars: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyList>, Vec<usize>)> {
    let chunk = chunk_size(chunk_chars)?;
    let engine = engine.get();
    let data = data.as_bytes();
    let bounds = bounds_of(offsets.as_bytes(), wide)
        .ok_or_else(|| value_error(py, String::from("offsets are not those of the texts")))?;
    let (found, others) = py
        .detach(|| packed_texts(data, &bounds))
        .ok_or_else(|| value_error(py, String::from("offsets are not those of the texts")))?;
    let jobs: Vec<Job<'_>> = found
        .into_iter()
        .map(|(_, text)| Job::Text(Cow::Borrowed(text)))
        .collect();
    let values = engine.run(py, &jobs, chunk, true)?;
    let fps = PyList::empty(py);
    for value in values {
        fps.append(to_int(py, value)?)?;
    }
    Ok((fps, others))
}

/// Offsets as an array's bytes, each from the first: None when they are not a whole number of
/// integers, or one is below the first.
fn bounds_of(raw: &[u8], wide: bool) -> Option<Vec<usize>> {
    let values: Vec<i64> = if wide {
        let chunks = raw.chunks_exact(8);
        if !chunks.remainder().is_empty() {
            return None;
        }
        chunks
            .map(|c| i64::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
            .collect()
    } else {
        let chunks = raw.chunks_exact(4);
        if !chunks.remainder().is_empty() {
            return None;
        }
        chunks
            .map(|c| i64::from(i32::from_ne_bytes(c.try_into().unwrap_or([0; 4]))))
            .collect()
    };
    let first = *values.first()?;
    values
        .iter()
        .map(|&v| usize::try_from(v.checked_sub(first)?).ok())
        .collect()
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
    let lines = super::bytes_items(raws, "lines must be bytes")?;
    let wanted = Wanted {
        id_field: id_field.as_bytes(),
        text_field: text_field.as_bytes(),
        max_id,
    };
    let slices: Vec<&[u8]> = lines.iter().map(|line| line.as_bytes()).collect();
    let (found, others) = py.detach(|| read_text_lines(slices.iter().copied(), &wanted));
    let (ids, jobs): (Vec<&str>, Vec<Job<'_>>) = found
        .into_iter()
        .map(|(id, text)| (id, Job::Text(text)))
        .unzip();
    let values = engine.run(py, &jobs, chunk, true)?;
    let fps = PyList::empty(py);
    for value in values {
        fps.append(to_int(py, value)?)?;
    }
    Ok((PyList::new(py, ids)?, fps, others))
}
