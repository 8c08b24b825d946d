//! The Python boundary of the bulk path's packing (`resp`): numbers arrive as the bytes of numpy
//! arrays, a column as its entries packed end to end (bytes) with their ends, and the commands leave one
//! chunk per `__next__` as `(bytes, commands)`, so the server runs one chunk while the next is packed
//! (detached from Python).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use xxhash_rust::xxh3::xxh3_64;

use crate::pyglue::{type_error, type_name, value_error};
use crate::resp::{self, Chunk, Column, Groups, KeyForm, Lists, Refusal};

/// The widest hexadecimal key value (a table key has at most 64 bits: 16 digits).
const MAX_HEX_WIDTH: usize = 16;
/// The most arguments a command may have before its key, and the most columns it may carry.
const MAX_HEAD_ARGS: usize = 16;

/// The numbers in the bytes of a numpy array of (u)int64s, in the machine's byte order.
fn words(py: Python<'_>, data: &[u8], name: &str) -> PyResult<Vec<u64>> {
    if data.len() % 8 != 0 {
        return Err(value_error(py, format!("{name} must hold 8-byte numbers")));
    }
    Ok(data
        .chunks_exact(8)
        .map(|word| {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(word);
            u64::from_ne_bytes(bytes)
        })
        .collect())
}

fn positions(py: Python<'_>, data: &[u8], name: &str) -> PyResult<Vec<usize>> {
    words(py, data, name)?
        .into_iter()
        .map(|word| {
            usize::try_from(word)
                .map_err(|_| value_error(py, format!("{name}: {word} is out of range")))
        })
        .collect()
}

fn ends_bytes(ends: impl Iterator<Item = usize>) -> Vec<u8> {
    ends.flat_map(|end| (end as u64).to_ne_bytes()).collect()
}

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
                let ends = positions(py, ends.as_bytes(), "ends")?;
                let column = Column::Packed {
                    data: data.as_bytes(),
                    ends: &ends,
                };
                if !column.is_valid() {
                    return Err(value_error(
                        py,
                        String::from("a column's ends must rise within its data"),
                    ));
                }
                Ok(Self::Packed {
                    data: data.unbind(),
                    ends,
                })
            }
            ColumnArg::Stored(values, signed) => Ok(Self::Stored {
                values: words(py, values.as_bytes(), "fingerprints")?,
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

/// Window positions grouped by key, with the form of their keys.
struct HeldGroups {
    prefix: Vec<u8>,
    hex_width: usize,
    heads: Vec<u64>,
    bounds: Vec<usize>,
    rows: Vec<usize>,
}

impl HeldGroups {
    fn new(
        py: Python<'_>,
        (prefix, hex_width, heads, bounds, rows): (Vec<u8>, usize, &[u8], &[u8], &[u8]),
        positions_held: usize,
    ) -> PyResult<Self> {
        if hex_width > MAX_HEX_WIDTH {
            return Err(value_error(
                py,
                format!("hex_width must be at most {MAX_HEX_WIDTH}, got {hex_width}"),
            ));
        }
        let held = Self {
            prefix,
            hex_width,
            heads: words(py, heads, "heads")?,
            bounds: positions(py, bounds, "bounds")?,
            rows: positions(py, rows, "rows")?,
        };
        held.groups()
            .check(positions_held)
            .map_err(|refusal| match refusal {
                Refusal::Bounds => value_error(
                    py,
                    String::from("bounds must rise from 0 to len(rows), one per head and one more"),
                ),
                Refusal::Row(row) => value_error(
                    py,
                    format!("row {row} is past the columns' {positions_held} entries"),
                ),
            })?;
        Ok(held)
    }

    fn groups(&self) -> Groups<'_> {
        Groups {
            heads: &self.heads,
            bounds: &self.bounds,
            rows: &self.rows,
        }
    }

    fn form(&self) -> KeyForm<'_> {
        KeyForm {
            prefix: &self.prefix,
            hex_width: self.hex_width,
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
) -> PyResult<(HeldGroups, Vec<Held>)> {
    let columns = columns
        .into_iter()
        .map(|column| Held::new(py, column))
        .collect::<PyResult<Vec<_>>>()?;
    let size = columns.iter().map(Held::len).min().unwrap_or(usize::MAX);
    let (heads, bounds, rows) = groups;
    let groups = HeldGroups::new(py, (key.0, key.1, heads, bounds, rows), size)?;
    Ok((groups, columns))
}

/// `grouped.commands`, packed: one command per group, `head`, the group's key, then each of its
/// positions' entries of every column; an iterator of chunks of at least `chunk_args` arguments, as
/// `(RESP, commands)`.
#[pyclass(module = "simhash_redis_native")]
pub struct GroupedCommands {
    head: Vec<u8>,
    head_args: usize,
    groups: HeldGroups,
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
    groups: HeldGroups,
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

/// `grouped.attach_calls`, packed: the calls of lua/bulk_fp.lua for runs of groups holding `call_pairs`
/// fingerprints; `joined` gives the id lists of positions whose fingerprint several ids share; an
/// iterator of chunks as `(RESP, commands)`.
#[pyclass(module = "simhash_redis_native")]
pub struct AttachCalls {
    sha: Vec<u8>,
    counts: Option<Vec<u8>>,
    groups: HeldGroups,
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
        let (heads, bounds, rows) = groups;
        let size = fps.len().min(ids.len());
        let groups = HeldGroups::new(py, (prefix, 0, heads, bounds, rows), size)?;
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
    let mut data = Vec::new();
    let mut ends = Vec::with_capacity(items.len());
    for item in items.iter() {
        let item = item.cast_into::<PyBytes>().map_err(|err| {
            let found = type_name(err.into_inner().as_any());
            type_error(py, format!("a column holds bytes, got {found}"))
        })?;
        data.extend_from_slice(item.as_bytes());
        ends.push(data.len());
    }
    Ok((
        PyBytes::new(py, &data),
        PyBytes::new(py, &ends_bytes(ends.into_iter())),
    ))
}

/// The entries of a column, as a list of bytes.
#[pyfunction]
pub fn unpack_column<'py>(py: Python<'py>, column: ColumnArg<'py>) -> PyResult<Bound<'py, PyList>> {
    let held = Held::new(py, column)?;
    let column = held.view(py);
    let mut digits = itoa::Buffer::new();
    let items = (0..column.len()).map(|i| match column {
        Column::Packed { .. } => PyBytes::new(py, column.get(i)),
        Column::Stored { values, signed } => {
            PyBytes::new(py, resp::stored_digits(values[i], signed, &mut digits))
        }
    });
    PyList::new(py, items.collect::<Vec<_>>())
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
    let numbers: Vec<u8> = py.detach(|| {
        let mut digits = itoa::Buffer::new();
        let mut out = Vec::with_capacity(column.len() * 8);
        for i in 0..column.len() {
            let entry = match column {
                Column::Packed { .. } => column.get(i),
                Column::Stored { values, signed } => {
                    resp::stored_digits(values[i], signed, &mut digits)
                }
            };
            out.extend_from_slice(&(xxh3_64(entry) % buckets).to_ne_bytes());
        }
        out
    });
    Ok(PyBytes::new(py, &numbers))
}
