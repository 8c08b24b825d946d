//! The Python objects of the bulk path's packing (`crate::packing`, `crate::resp`): numbers arrive
//! as the bytes of numpy arrays, a column as its entries packed end to end (bytes) with their ends, and
//! the commands leave one chunk per `__next__` as `(bytes, commands)`, so the server runs one chunk
//! while the next is packed (detached from Python).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use super::{type_error, type_name, value_error, Raise};
use crate::packing::{self, GroupSpec, MAX_HEAD_ARGS};
use crate::resp::{self, Chunk, Column, Lists};

/// A column as Python gives it: `(entries end to end, their ends)`, or `(fingerprints, signed)` whose
/// entries are the fingerprints' stored forms.
#[derive(FromPyObject)]
pub enum ColumnArg<'py> {
    Packed(Bound<'py, PyBytes>, Bound<'py, PyBytes>),
    Stored(Bound<'py, PyBytes>, bool),
}

/// A column held for the packers, checked.
enum Held {
    Packed { data: Py<PyBytes>, ends: Vec<usize> },
    Stored { values: Vec<u64>, signed: bool },
}

impl Held {
    fn new(py: Python<'_>, column: ColumnArg<'_>) -> PyResult<Self> {
        match column {
            ColumnArg::Packed(data, ends) => {
                let ends = packing::packed_ends(data.as_bytes(), ends.as_bytes()).raise(py)?;
                Ok(Self::Packed {
                    data: data.unbind(),
                    ends,
                })
            }
            ColumnArg::Stored(values, signed) => Ok(Self::Stored {
                values: packing::words(values.as_bytes(), "fingerprints").raise(py)?,
                signed,
            }),
        }
    }

    fn view<'a>(&'a self, py: Python<'a>) -> Column<'a> {
        match self {
            Self::Packed { data, ends } => Column::Packed {
                data: data.bind(py).as_bytes(),
                ends,
            },
            Self::Stored { values, signed } => Column::Stored {
                values,
                signed: *signed,
            },
        }
    }

    fn len(&self) -> usize {
        match self {
            Self::Packed { ends, .. } => ends.len(),
            Self::Stored { values, .. } => values.len(),
        }
    }
}

fn chunk_out(py: Python<'_>, chunk: Chunk) -> Option<(Bound<'_, PyBytes>, usize)> {
    (chunk.commands > 0).then(|| (PyBytes::new(py, &chunk.data), chunk.commands))
}

/// The columns an iterator of commands gathers from, held for its life, and its groups, checked
/// against the shortest of them.
#[allow(clippy::type_complexity)] // the Python signature's tuples
fn held_columns(
    py: Python<'_>,
    key: (Vec<u8>, usize),
    groups: (&[u8], &[u8], &[u8]),
    columns: Vec<ColumnArg<'_>>,
) -> PyResult<(GroupSpec, Vec<Held>)> {
    let columns = columns
        .into_iter()
        .map(|column| Held::new(py, column))
        .collect::<PyResult<Vec<_>>>()?;
    let size = columns.iter().map(Held::len).min().unwrap_or(usize::MAX);
    let groups = GroupSpec::new(key.0, key.1, groups, size).raise(py)?;
    Ok((groups, columns))
}

/// `grouped.commands`, packed: one command per group, `head`, the group's key, then each of its
/// positions' entries of every column; an iterator of chunks of at least `chunk_args` arguments, as
/// `(RESP, commands)`.
#[pyclass(module = "simhash_redis_native")]
pub struct GroupedCommands {
    head: Vec<u8>,
    head_args: usize,
    groups: GroupSpec,
    columns: Vec<Held>,
    chunk_args: usize,
    next: usize,
}

#[pymethods]
impl GroupedCommands {
    #[new]
    #[pyo3(signature = (head, head_args, key, groups, columns, chunk_args))]
    #[allow(clippy::type_complexity)] // the Python signature's tuples
    fn new(
        py: Python<'_>,
        head: Vec<u8>,
        head_args: usize,
        key: (Vec<u8>, usize),
        groups: (&[u8], &[u8], &[u8]),
        columns: Vec<ColumnArg<'_>>,
        chunk_args: usize,
    ) -> PyResult<Self> {
        if head_args > MAX_HEAD_ARGS || columns.len() > MAX_HEAD_ARGS {
            return Err(value_error(
                py,
                format!(
                    "at most {MAX_HEAD_ARGS} arguments before the key and {MAX_HEAD_ARGS} columns"
                ),
            ));
        }
        let (groups, columns) = held_columns(py, key, groups, columns)?;
        Ok(Self {
            head,
            head_args,
            groups,
            columns,
            chunk_args,
            next: 0,
        })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(
        mut slf: PyRefMut<'py, Self>,
        py: Python<'py>,
    ) -> Option<(Bound<'py, PyBytes>, usize)> {
        let this = &*slf;
        let columns: Vec<Column<'_>> = this.columns.iter().map(|column| column.view(py)).collect();
        let (groups, form) = (this.groups.groups(), this.groups.form());
        let chunk = py.detach(|| {
            resp::pack_groups(
                &this.head,
                this.head_args,
                &form,
                &groups,
                &columns,
                this.next,
                this.chunk_args,
            )
        });
        slf.next = chunk.next;
        chunk_out(py, chunk)
    }
}

/// `grouped.script_runs`, packed: calls of a script for runs of groups holding `call_entries`
/// positions, each naming its groups' keys (then `counts`, if given) and giving, per group, its size and
/// its positions' entries of every column; an iterator of chunks as `(RESP, commands)`.
#[pyclass(module = "simhash_redis_native")]
pub struct ScriptRuns {
    sha: Vec<u8>,
    counts: Option<Vec<u8>>,
    groups: GroupSpec,
    columns: Vec<Held>,
    call_entries: usize,
    chunk_args: usize,
    next: usize,
}

#[pymethods]
impl ScriptRuns {
    #[new]
    #[pyo3(signature = (sha, counts, key, groups, columns, call_entries, chunk_args))]
    #[allow(clippy::too_many_arguments, clippy::type_complexity)] // the Python signature
    fn new(
        py: Python<'_>,
        sha: Vec<u8>,
        counts: Option<Vec<u8>>,
        key: (Vec<u8>, usize),
        groups: (&[u8], &[u8], &[u8]),
        columns: Vec<ColumnArg<'_>>,
        call_entries: usize,
        chunk_args: usize,
    ) -> PyResult<Self> {
        if columns.len() > MAX_HEAD_ARGS {
            return Err(value_error(py, format!("at most {MAX_HEAD_ARGS} columns")));
        }
        let (groups, columns) = held_columns(py, key, groups, columns)?;
        Ok(Self {
            sha,
            counts,
            groups,
            columns,
            call_entries,
            chunk_args,
            next: 0,
        })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(
        mut slf: PyRefMut<'py, Self>,
        py: Python<'py>,
    ) -> Option<(Bound<'py, PyBytes>, usize)> {
        let this = &*slf;
        let columns: Vec<Column<'_>> = this.columns.iter().map(|column| column.view(py)).collect();
        let (groups, form) = (this.groups.groups(), this.groups.form());
        let script = resp::ScriptCalls {
            sha: &this.sha,
            counts: this.counts.as_deref(),
        };
        let chunk = py.detach(|| {
            resp::pack_runs(
                &script,
                &form,
                &groups,
                &columns,
                this.call_entries,
                this.next,
                this.chunk_args,
            )
        });
        slf.next = chunk.next;
        chunk_out(py, chunk)
    }
}

/// `grouped.attach_calls`, packed: the calls of store/lua/bulk_fp.lua for runs of groups holding `call_pairs`
/// fingerprints; `joined` gives the id lists of positions whose fingerprint several ids share; an
/// iterator of chunks as `(RESP, commands)`.
#[pyclass(module = "simhash_redis_native")]
pub struct AttachCalls {
    sha: Vec<u8>,
    counts: Option<Vec<u8>>,
    groups: GroupSpec,
    fps: Held,
    ids: Held,
    joined: Vec<(usize, Py<PyBytes>)>,
    call_pairs: usize,
    chunk_args: usize,
    next: usize,
}

#[pymethods]
impl AttachCalls {
    #[new]
    #[pyo3(signature = (sha, counts, prefix, groups, fps, ids, joined, call_pairs, chunk_args))]
    #[allow(clippy::too_many_arguments, clippy::type_complexity)] // the Python signature
    fn new(
        py: Python<'_>,
        sha: Vec<u8>,
        counts: Option<Vec<u8>>,
        prefix: Vec<u8>,
        groups: (&[u8], &[u8], &[u8]),
        fps: ColumnArg<'_>,
        ids: ColumnArg<'_>,
        joined: Bound<'_, PyDict>,
        call_pairs: usize,
        chunk_args: usize,
    ) -> PyResult<Self> {
        let (fps, ids) = (Held::new(py, fps)?, Held::new(py, ids)?);
        let mut lists = Vec::with_capacity(joined.len());
        for (position, list) in joined.iter() {
            let list = list.cast_into::<PyBytes>().map_err(|err| {
                let found = type_name(err.into_inner().as_any());
                type_error(
                    py,
                    format!("joined must map positions to bytes, got {found}"),
                )
            })?;
            lists.push((position.extract::<usize>()?, list.unbind()));
        }
        lists.sort_by_key(|&(position, _)| position);
        let size = fps.len().min(ids.len());
        let groups = GroupSpec::new(prefix, 0, groups, size).raise(py)?;
        Ok(Self {
            sha,
            counts,
            groups,
            fps,
            ids,
            joined: lists,
            call_pairs,
            chunk_args,
            next: 0,
        })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(
        mut slf: PyRefMut<'py, Self>,
        py: Python<'py>,
    ) -> Option<(Bound<'py, PyBytes>, usize)> {
        let this = &*slf;
        let fps = this.fps.view(py);
        let joined = this
            .joined
            .iter()
            .map(|(position, list)| (*position, list.bind(py).as_bytes()))
            .collect();
        let lists = Lists {
            ids: this.ids.view(py),
            joined,
        };
        let (groups, form) = (this.groups.groups(), this.groups.form());
        let chunk = py.detach(|| {
            resp::pack_attach(
                &resp::ScriptCalls {
                    sha: &this.sha,
                    counts: this.counts.as_deref(),
                },
                &form,
                &groups,
                fps,
                &lists,
                this.call_pairs,
                this.next,
                this.chunk_args,
            )
        });
        slf.next = chunk.next;
        chunk_out(py, chunk)
    }
}

/// A list of bytes as a column: `(entries end to end, ends as a uint64 array's bytes)`.
#[pyfunction]
pub fn pack_column<'py>(
    py: Python<'py>,
    items: Bound<'py, PyList>,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let items = items
        .iter()
        .map(|item| {
            item.cast_into::<PyBytes>().map_err(|err| {
                let found = type_name(err.into_inner().as_any());
                type_error(py, format!("a column holds bytes, got {found}"))
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    let (data, ends) = packing::pack_entries(items.iter().map(|item| item.as_bytes()));
    Ok((PyBytes::new(py, &data), PyBytes::new(py, &ends)))
}

/// The entries of a column, as a list of bytes.
#[pyfunction]
pub fn unpack_column<'py>(py: Python<'py>, column: ColumnArg<'py>) -> PyResult<Bound<'py, PyList>> {
    let held = Held::new(py, column)?;
    let mut items = Vec::with_capacity(held.len());
    packing::for_each_entry(&held.view(py), |entry| items.push(PyBytes::new(py, entry)));
    PyList::new(py, items)
}

/// `KeySchema.bucket_numbers` of a column's entries: xxh3_64 of each modulo `buckets`, as a uint64
/// array's bytes.
#[pyfunction]
pub fn column_buckets<'py>(
    py: Python<'py>,
    column: ColumnArg<'py>,
    buckets: u64,
) -> PyResult<Bound<'py, PyBytes>> {
    if buckets == 0 {
        return Err(value_error(py, String::from("buckets must be at least 1")));
    }
    let held = Held::new(py, column)?;
    let column = held.view(py);
    let numbers = py.detach(|| packing::buckets(&column, buckets)).raise(py)?;
    Ok(PyBytes::new(py, &numbers))
}
