//! The odd sketcher as a Python object: documents as the adapter prepares them (`MinRef`), levels as
//! the adapter checked them (checked again here), the work `crate::odd_sketch`, run through
//! `Unicode::settle` (detached from Python for batches).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use super::engine::{MinHash, MinRef};
use super::unicode::Unicode;
use super::Raise;
use crate::minhash::{MinJob, Sketcher};
use crate::odd_sketch::{self, Level, OddSketcher};
use crate::resolver::Resolver;

/// A level argument: None, or 0..=15.
fn level_of(py: Python<'_>, level: Option<i64>) -> PyResult<Option<Level>> {
    level.map(|l| Level::new(l, "level")).transpose().raise(py)
}

/// The odd sketches of an `OddSketcher` (n, seed).
#[pyclass(frozen, module = "simhash_redis_native")]
pub struct OddSketch {
    pub(super) sketcher: OddSketcher,
    pub(super) unicode: Py<Unicode>,
}

#[pymethods]
impl OddSketch {
    /// A sketcher for `OddSketcher(n, seed)`.
    #[new]
    fn new(py: Python<'_>, unicode: Py<Unicode>, n: usize, seed: u64) -> PyResult<Self> {
        let sketcher = OddSketcher::new(n, seed).raise(py)?;
        Ok(OddSketch { sketcher, unicode })
    }

    /// The sketch of one document (str, bytes, or a list or tuple of str tokens) at `level` (None: its
    /// own); `name` is used in messages.
    #[pyo3(signature = (doc, level = None, name = "doc"))]
    fn sketch<'py>(
        &self,
        py: Python<'py>,
        doc: Bound<'py, PyAny>,
        level: Option<i64>,
        name: &str,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let level = level_of(py, level)?;
        let doc = MinRef::parse(doc, name)?;
        let job = doc.job()?;
        let sketcher = &self.sketcher;
        let sketch = self
            .unicode
            .get()
            .settle_one(py, false, |resolver| sketcher.sketch(&job, level, resolver))?;
        Ok(PyBytes::new(py, &sketch))
    }

    /// The sketches of many documents at one `level` (None: each its own), computed detached from
    /// Python.
    #[pyo3(signature = (docs, level = None))]
    fn sketch_many<'py>(
        &self,
        py: Python<'py>,
        docs: &Bound<'py, PyList>,
        level: Option<i64>,
    ) -> PyResult<Bound<'py, PyList>> {
        let level = level_of(py, level)?;
        let refs = docs
            .iter()
            .enumerate()
            .map(|(i, doc)| MinRef::parse(doc, &format!("docs[{i}]")))
            .collect::<PyResult<Vec<_>>>()?;
        let jobs = refs.iter().map(MinRef::job).collect::<PyResult<Vec<_>>>()?;
        let sketcher = &self.sketcher;
        let sketches = self
            .unicode
            .get()
            .settle(py, jobs.len(), true, |i, resolver| {
                jobs.get(i)
                    .map(|job| sketcher.sketch(job, level, resolver))
                    .unwrap_or_default()
            })?;
        let out = PyList::empty(py);
        for sketch in sketches {
            out.append(PyBytes::new(py, &sketch))?;
        }
        Ok(out)
    }

    /// The query sketches of `BandedOddSketcher` of many documents, each document's shingles made
    /// once (`OddSketcher::banded_query`), computed detached from Python for more than one.
    fn banded_many<'py>(
        &self,
        py: Python<'py>,
        docs: &Bound<'py, PyList>,
        bands: PyRef<'py, MinHash>,
        above: usize,
    ) -> PyResult<Bound<'py, PyList>> {
        self.banded(py, docs, &bands, |sketcher, minhash, job, resolver| {
            sketcher.banded_query(minhash, job, above, resolver)
        })
    }

    /// The stored sketches of `BandedOddSketcher` of many documents (the first bytes of their
    /// `banded_many`), each document's shingles made once (`OddSketcher::banded_stored`), computed
    /// detached from Python for more than one.
    fn banded_stored_many<'py>(
        &self,
        py: Python<'py>,
        docs: &Bound<'py, PyList>,
        bands: PyRef<'py, MinHash>,
    ) -> PyResult<Bound<'py, PyList>> {
        self.banded(py, docs, &bands, |sketcher, minhash, job, resolver| {
            sketcher.banded_stored(minhash, job, resolver)
        })
    }

    /// The sketches of one document at each of `levels`, its shingles made once.
    #[pyo3(signature = (doc, levels, name = "doc"))]
    fn sketch_levels<'py>(
        &self,
        py: Python<'py>,
        doc: Bound<'py, PyAny>,
        levels: Vec<i64>,
        name: &str,
    ) -> PyResult<Bound<'py, PyList>> {
        let levels = levels
            .iter()
            .enumerate()
            .map(|(i, &l)| Level::new(l, &format!("levels[{i}]")))
            .collect::<Result<Vec<_>, _>>()
            .raise(py)?;
        let doc = MinRef::parse(doc, name)?;
        let job = doc.job()?;
        let sketcher = &self.sketcher;
        let sketches = self.unicode.get().settle_one(py, false, |resolver| {
            sketcher.sketch_levels(&job, &levels, resolver)
        })?;
        let out = PyList::empty(py);
        for sketch in sketches {
            out.append(PyBytes::new(py, &sketch))?;
        }
        Ok(out)
    }
}

impl OddSketch {
    /// `make` of each of the documents with the band MinHash `bands` (checked once, not per document).
    fn banded<'py>(
        &self,
        py: Python<'py>,
        docs: &Bound<'py, PyList>,
        bands: &MinHash,
        make: impl Fn(&OddSketcher, &Sketcher, &MinJob<'_>, &mut Resolver<'_>) -> Vec<u8> + Sync,
    ) -> PyResult<Bound<'py, PyList>> {
        let refs = docs
            .iter()
            .enumerate()
            .map(|(i, doc)| MinRef::parse(doc, &format!("docs[{i}]")))
            .collect::<PyResult<Vec<_>>>()?;
        let jobs = refs.iter().map(MinRef::job).collect::<PyResult<Vec<_>>>()?;
        let (sketcher, minhash) = (&self.sketcher, &bands.sketcher);
        sketcher.banded_check(minhash).raise(py)?;
        let sketches =
            self.unicode
                .get()
                .settle(py, jobs.len(), jobs.len() > 1, |i, resolver| {
                    jobs.get(i)
                        .map(|job| make(sketcher, minhash, job, resolver))
                        .unwrap_or_default()
                })?;
        let out = PyList::empty(py);
        for sketch in sketches {
            out.append(PyBytes::new(py, &sketch))?;
        }
        Ok(out)
    }
}

/// `OddSketcher.estimate` of two sketches (bytes of 128), as the pure estimator gives it.
#[pyfunction]
pub fn odd_estimate(py: Python<'_>, a: &[u8], b: &[u8]) -> PyResult<f64> {
    odd_sketch::estimate(a, b).raise(py)
}
