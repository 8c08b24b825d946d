//! The link to the pinned Unicode data in Python: the `Unicode` object holding the process's tables
//! (`UnicodeState`) and the Python functions that complete them (`simhash_redis.fingerprinting`'s
//! `Normalizer`: its tables, `image_parts`, `normalize`, `class_of`/`isspace`, `is_nfkc`).
//!
//! Compute code never calls these: it runs against the tables and the answers so far, and notes what
//! it lacks (`crate::resolver`). `Unicode::settle` runs the work, asks Python here for what was
//! noted, and runs what needed it again, until every result stands.

use std::sync::Arc;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::resolver::{Answers, Needs, Resolver};
use crate::unicode::{Fast, Norm, Parts, Tables, UnicodeState, BMP, CJK};

/// Rounds of `settle`: one that notes what is needed, one after the tables are loaded (once per
/// process), one after Python's answers; one more to spare.
const ROUNDS: usize = 4;

/// The pinned Unicode data, with the Python functions that complete it.
#[pyclass(frozen, module = "simhash_redis_native")]
pub struct Unicode {
    pub(crate) state: Arc<UnicodeState>,
    load_tables: Py<PyAny>,
    image_parts: Py<PyAny>,
    normalize: Py<PyAny>,
    char_info: Py<PyAny>,
    is_normalized: Py<PyAny>,
}

#[pymethods]
impl Unicode {
    /// Keep the functions; nothing is loaded before the first non-ASCII text.
    #[new]
    fn new(
        load_tables: Py<PyAny>,
        image_parts: Py<PyAny>,
        normalize: Py<PyAny>,
        char_info: Py<PyAny>,
        is_normalized: Py<PyAny>,
    ) -> Self {
        Unicode {
            state: Arc::new(UnicodeState::default()),
            load_tables,
            image_parts,
            normalize,
            char_info,
            is_normalized,
        }
    }

    /// Whether the tables are loaded.
    fn loaded(&self) -> bool {
        self.state.tables().is_some()
    }

    /// Load the tables now (they are loaded on first need otherwise).
    fn load(&self, py: Python<'_>) -> PyResult<()> {
        self.tables(py).map(|_| ())
    }
}

impl Unicode {
    /// Run `work` for items `0..count` until none needs more from Python, and return its results in
    /// order. Each round runs the items not settled yet (detached from Python when `detach`), then
    /// asks Python for what they noted.
    pub(crate) fn settle<T: Send>(
        &self,
        py: Python<'_>,
        count: usize,
        detach: bool,
        work: impl Fn(usize, &mut Resolver<'_>) -> T + Sync,
    ) -> PyResult<Vec<T>> {
        let state = &*self.state;
        let mut answers = Answers::default();
        let mut out: Vec<Option<T>> = std::iter::repeat_with(|| None).take(count).collect();
        let mut todo: Vec<usize> = (0..count).collect();
        for _ in 0..ROUNDS {
            let run = |todo: &[usize], answers: &Answers| -> Vec<(usize, T, Needs)> {
                let mut resolver = Resolver::new(state, answers);
                todo.iter()
                    .map(|&i| {
                        let value = work(i, &mut resolver);
                        (i, value, resolver.take_needs())
                    })
                    .collect()
            };
            let done = if detach {
                py.detach(|| run(&todo, &answers))
            } else {
                run(&todo, &answers)
            };
            let mut needs = Needs::default();
            todo.clear();
            for (i, value, need) in done {
                if need.is_empty() {
                    if let Some(slot) = out.get_mut(i) {
                        *slot = Some(value);
                    }
                } else {
                    needs.merge(need);
                    todo.push(i);
                }
            }
            if todo.is_empty() {
                return Ok(out.into_iter().flatten().collect());
            }
            self.answer(py, needs, &mut answers)?;
        }
        Err(PyRuntimeError::new_err(
            "internal error: the Unicode data did not settle",
        ))
    }

    /// `settle` of one item, without the bookkeeping of a batch (a single call's few microseconds).
    pub(crate) fn settle_one<T: Send>(
        &self,
        py: Python<'_>,
        detach: bool,
        work: impl Fn(&mut Resolver<'_>) -> T + Sync,
    ) -> PyResult<T> {
        let state = &*self.state;
        let mut answers = Answers::default();
        for _ in 0..ROUNDS {
            let run = |answers: &Answers| -> (T, Needs) {
                let mut resolver = Resolver::new(state, answers);
                let value = work(&mut resolver);
                (value, resolver.take_needs())
            };
            let (value, needs) = if detach {
                py.detach(|| run(&answers))
            } else {
                run(&answers)
            };
            if needs.is_empty() {
                return Ok(value);
            }
            self.answer(py, needs, &mut answers)?;
        }
        Err(PyRuntimeError::new_err(
            "internal error: the Unicode data did not settle",
        ))
    }

    /// Ask Python for what computations noted; texts wait for the tables, which may answer them.
    fn answer(&self, py: Python<'_>, needs: Needs, answers: &mut Answers) -> PyResult<()> {
        if needs.tables {
            return self.tables(py).map(|_| ());
        }
        let mut astral = needs.astral;
        astral.sort_unstable();
        astral.dedup();
        astral.retain(|&cp| self.state.info(cp).is_none());
        self.fetch_astral(py, &astral)?;
        for text in needs.texts {
            if !answers.contains(&text) {
                let mut norm = Norm::default();
                self.normalize_text(py, &text, &mut norm)?;
                answers.insert(text, norm);
            }
        }
        Ok(())
    }

    /// The tables, loaded through Python on first use.
    fn tables(&self, py: Python<'_>) -> PyResult<&Tables> {
        if let Some(tables) = self.state.tables() {
            return Ok(tables);
        }
        let loaded = self.load_tables.bind(py).call0()?;
        let (raw, classes, space): (Bound<'_, PyBytes>, Bound<'_, PyBytes>, Bound<'_, PyBytes>) =
            loaded.extract()?;
        let tables = Tables::from_bytes(raw.as_bytes(), classes.as_bytes(), space.as_bytes())
            .ok_or_else(|| {
                PyValueError::new_err("the Unicode tables have the wrong size or content")
            })?;
        Ok(self.state.set_tables(tables))
    }

    /// Ask `image_parts` about flagged code points not known yet.
    fn fetch_parts(&self, py: Python<'_>, cps: &[u32]) -> PyResult<()> {
        for &cp in cps {
            let found = self.image_parts.bind(py).call1((cp,))?;
            let parts = if found.is_none() {
                None
            } else {
                let (cps, cls, composing, image): (Vec<u32>, Vec<u8>, bool, Vec<u32>) =
                    found.extract()?;
                if cps.len() != cls.len()
                    || cps.iter().any(|&c| c as usize >= BMP)
                    || cls.iter().any(|&c| c > CJK)
                    || image.iter().any(|&c| char::from_u32(c).is_none())
                {
                    return Err(PyValueError::new_err(format!(
                        "bad image parts for U+{cp:04X}"
                    )));
                }
                Some(Parts {
                    cps,
                    cls,
                    composing,
                    image,
                })
            };
            self.state.set_parts(cp, parts);
        }
        Ok(())
    }

    /// Ask `char_info` about astral code points not known yet.
    fn fetch_astral(&self, py: Python<'_>, cps: &[u32]) -> PyResult<()> {
        for &cp in cps {
            let (class, space): (u8, bool) = self.char_info.bind(py).call1((cp,))?.extract()?;
            self.state.set_astral(cp, class, space);
        }
        Ok(())
    }

    /// `normalize(text)` by Python, classified.
    fn python_normalize(&self, py: Python<'_>, text: &str, out: &mut Norm) -> PyResult<()> {
        let norm = self.normalize.bind(py).call1((PyString::new(py, text),))?;
        let norm = norm.cast::<PyString>()?;
        let norm = norm.to_str()?;
        match self.state.classify(norm, out) {
            Ok(()) => Ok(()),
            Err(missing) => {
                self.fetch_astral(py, &missing)?;
                self.state
                    .classify(norm, out)
                    .map_err(|_| PyValueError::new_err("code point classes are missing"))
            }
        }
    }

    /// Normalise a non-ASCII, surrogate-free text as `Normalizer.normalize` does: the table path where
    /// it holds, completed by Python where the tables cannot tell.
    fn normalize_text(&self, py: Python<'_>, text: &str, out: &mut Norm) -> PyResult<()> {
        self.tables(py)?;
        for _ in 0..3 {
            match self.state.fast(text, out) {
                Fast::Done => return Ok(()),
                Fast::NeedPython => return self.python_normalize(py, text, out),
                Fast::NeedParts => {
                    let missing = self.state.missing_parts(text);
                    self.fetch_parts(py, &missing)?;
                }
                Fast::Composing => {
                    let normalized = match self.state.mapped_text(text) {
                        Some(mapped) => {
                            let mapped = PyString::new(py, &mapped);
                            self.is_normalized.bind(py).call1((mapped,))?.is_truthy()?
                        }
                        None => false,
                    };
                    return if normalized {
                        Ok(())
                    } else {
                        self.python_normalize(py, text, out)
                    };
                }
            }
        }
        self.python_normalize(py, text, out)
    }
}
