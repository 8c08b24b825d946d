//! The link to the running Python's Unicode data: the `Unicode` object holding the tables and the
//! callbacks into `simhash_redis.features`, and the two normalisers built on it: `TableNormalizer`
//! (no Python: the table path, or `Stop::NeedPython`) and `PyNormalizer` (attached to Python: the
//! table path, completed by the callbacks exactly where `features.classified_code_points` would ask
//! `unicodedata`).

use std::borrow::Cow;
use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyString, PyType};

use crate::engine::{Normalizer, Stop};
use crate::unicode::{Fast, Norm, Parts, Tables, UnicodeState, BMP};

/// The exception types raised for bad arguments: (value error, type error).
static ERROR_TYPES: PyOnceLock<(Py<PyType>, Py<PyType>)> = PyOnceLock::new();

/// Set the exception types that bad arguments raise (by default ValueError and TypeError); the first
/// call wins.
pub fn set_error_types(
    py: Python<'_>,
    value_error: Bound<'_, PyType>,
    type_error: Bound<'_, PyType>,
) -> bool {
    ERROR_TYPES
        .set(py, (value_error.unbind(), type_error.unbind()))
        .is_ok()
}

/// A bad-value error with a message (`InvalidArgument` once the adapter has set the types).
pub fn value_error(py: Python<'_>, message: String) -> PyErr {
    match ERROR_TYPES.get(py) {
        Some((value, _)) => PyErr::from_type(value.bind(py).clone(), message),
        None => PyValueError::new_err(message),
    }
}

/// A wrong-type error with a message (`InvalidType` once the adapter has set the types).
pub fn type_error(py: Python<'_>, message: String) -> PyErr {
    match ERROR_TYPES.get(py) {
        Some((_, type_err)) => PyErr::from_type(type_err.bind(py).clone(), message),
        None => PyTypeError::new_err(message),
    }
}

/// `type(obj).__name__`.
pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|_| String::from("?"))
}

/// Replace each surrogate (encoded by "surrogatepass" as ED A0-BF 80-BF) by U+FFFD.
fn replace_surrogates(data: &[u8]) -> String {
    let mut out = Vec::with_capacity(data.len());
    let mut i = 0;
    while let Some(&b) = data.get(i) {
        if b == 0xED {
            if let (Some(&b1), Some(&b2)) = (data.get(i + 1), data.get(i + 2)) {
                if (0xA0..=0xBF).contains(&b1) && (0x80..=0xBF).contains(&b2) {
                    out.extend_from_slice("\u{FFFD}".as_bytes());
                    i += 3;
                    continue;
                }
            }
        }
        out.push(b);
        i += 1;
    }
    match String::from_utf8(out) {
        Ok(text) => text,
        Err(err) => String::from_utf8_lossy(err.as_bytes()).into_owned(),
    }
}

/// The text of a str (surrogates replaced by U+FFFD) or of UTF-8 bytes (invalid sequences replaced
/// as `bytes.decode("utf-8", "replace")` does), borrowed when possible.
pub fn text_of<'a>(obj: &'a Bound<'_, PyAny>) -> PyResult<Option<Cow<'a, str>>> {
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

/// The running Python's Unicode data, with the callbacks that complete it.
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
    /// Keep the callbacks; nothing is loaded before the first non-ASCII text.
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
    /// The tables, loaded through the callback on first use.
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
                    || cls.iter().any(|&c| c > crate::unicode::CJK)
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

    /// `features.normalize(text)` by Python, classified.
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

    /// Normalise a non-ASCII, surrogate-free text as `features.classified_code_points` does.
    pub(crate) fn normalize_text(
        &self,
        py: Python<'_>,
        text: &str,
        out: &mut Norm,
    ) -> PyResult<()> {
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
                    let mapped = self.state.mapped_text(text);
                    let normalized = match mapped {
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

    /// Whether a normalised code point is whitespace, asking Python about unknown astral ones.
    pub(crate) fn is_space(&self, py: Python<'_>, cp: u32) -> PyResult<bool> {
        self.tables(py)?;
        if let Some((_, space)) = self.state.info(cp) {
            return Ok(space);
        }
        self.fetch_astral(py, &[cp])?;
        Ok(self.state.info(cp).is_some_and(|(_, space)| space))
    }
}

/// The table path alone, for work detached from Python.
pub struct TableNormalizer<'a> {
    state: &'a UnicodeState,
}

impl<'a> TableNormalizer<'a> {
    /// A normaliser over the process's Unicode data.
    pub fn new(state: &'a UnicodeState) -> Self {
        TableNormalizer { state }
    }
}

impl Normalizer for TableNormalizer<'_> {
    fn normalize(&mut self, text: &str, out: &mut Norm) -> Result<(), Stop> {
        match self.state.fast(text, out) {
            Fast::Done => Ok(()),
            _ => Err(Stop::NeedPython),
        }
    }

    fn is_space(&mut self, cp: u32) -> Result<bool, Stop> {
        self.state
            .info(cp)
            .map(|(_, space)| space)
            .ok_or(Stop::NeedPython)
    }

    fn fast_tokens(
        &mut self,
        text: &str,
        buf: &mut Vec<u8>,
        sink: impl FnMut(&[u8]),
    ) -> Result<bool, Stop> {
        Ok(self.state.fast_tokens(text, buf, sink))
    }
}

/// The table path completed by Python, attached to the interpreter.
pub struct PyNormalizer<'a, 'py> {
    py: Python<'py>,
    unicode: &'a Unicode,
}

impl<'a, 'py> PyNormalizer<'a, 'py> {
    /// A normaliser that may call into Python.
    pub fn new(py: Python<'py>, unicode: &'a Unicode) -> Self {
        PyNormalizer { py, unicode }
    }
}

impl Normalizer for PyNormalizer<'_, '_> {
    fn normalize(&mut self, text: &str, out: &mut Norm) -> Result<(), Stop> {
        self.unicode
            .normalize_text(self.py, text, out)
            .map_err(Stop::Error)
    }

    fn is_space(&mut self, cp: u32) -> Result<bool, Stop> {
        self.unicode.is_space(self.py, cp).map_err(Stop::Error)
    }

    fn fast_tokens(
        &mut self,
        text: &str,
        buf: &mut Vec<u8>,
        sink: impl FnMut(&[u8]),
    ) -> Result<bool, Stop> {
        self.unicode.tables(self.py).map_err(Stop::Error)?;
        Ok(self.unicode.state.fast_tokens(text, buf, sink))
    }
}
