//! The bulk path's packing requests as plain data, checked: numbers as the bytes of numpy arrays,
//! columns of entries, and window positions grouped by key; plus the per-entry kernels of a column
//! (its entries, its buckets). The commands themselves are written by `resp`; the Python objects that
//! hold a request across calls are in `crate::python::packing`.

use xxhash_rust::xxh3::xxh3_64;

use crate::error::{value, Error};
use crate::resp::{self, Column, Groups, KeyForm, Refusal};

/// The widest hexadecimal key value (a table key has at most 64 bits: 16 digits).
pub const MAX_HEX_WIDTH: usize = 16;
/// The most arguments a command may have before its key, and the most columns it may carry.
pub const MAX_HEAD_ARGS: usize = 16;

/// The numbers in the bytes of a numpy array of (u)int64s, in the machine's byte order.
///
/// # Errors
/// `Error::Value` when the length is not a multiple of 8; `name` is used in the message.
pub fn words(data: &[u8], name: &str) -> Result<Vec<u64>, Error> {
    if data.len() % 8 != 0 {
        return Err(value(format!("{name} must hold 8-byte numbers")));
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

/// `words` as positions (each must fit a usize).
///
/// # Errors
/// As `words`, and `Error::Value` for a number out of range.
pub fn positions(data: &[u8], name: &str) -> Result<Vec<usize>, Error> {
    words(data, name)?
        .into_iter()
        .map(|word| {
            usize::try_from(word).map_err(|_| value(format!("{name}: {word} is out of range")))
        })
        .collect()
}

/// Ends as the bytes of a uint64 array.
pub fn ends_bytes(ends: impl Iterator<Item = usize>) -> Vec<u8> {
    ends.flat_map(|end| (end as u64).to_ne_bytes()).collect()
}

/// A packed column's ends, checked against its data.
///
/// # Errors
/// `Error::Value` unless the ends rise within the data.
pub fn packed_ends(data: &[u8], ends: &[u8]) -> Result<Vec<usize>, Error> {
    let ends = positions(ends, "ends")?;
    if !(Column::Packed { data, ends: &ends }).is_valid() {
        return Err(value("a column's ends must rise within its data"));
    }
    Ok(ends)
}

/// Entries end to end and their ends (as a uint64 array's bytes), of a list of entries.
pub fn pack_entries<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> (Vec<u8>, Vec<u8>) {
    let mut data = Vec::new();
    let mut ends = Vec::new();
    for item in items {
        data.extend_from_slice(item);
        ends.push(data.len());
    }
    (data, ends_bytes(ends.into_iter()))
}

/// Each entry of a column, in order (a fingerprint's as its stored form).
pub fn for_each_entry(column: &Column<'_>, mut each: impl FnMut(&[u8])) {
    let mut digits = itoa::Buffer::new();
    for i in 0..column.len() {
        match *column {
            Column::Packed { .. } => each(column.get(i)),
            Column::Stored { values, signed } => {
                each(resp::stored_digits(values[i], signed, &mut digits))
            }
        }
    }
}

/// `KeySchema.bucket_numbers` of a column's entries: xxh3_64 of each modulo `buckets`, as a uint64
/// array's bytes.
///
/// # Errors
/// `Error::Value` when `buckets` is 0.
pub fn buckets(column: &Column<'_>, buckets: u64) -> Result<Vec<u8>, Error> {
    if buckets == 0 {
        return Err(value("buckets must be at least 1"));
    }
    let mut out = Vec::with_capacity(column.len() * 8);
    for_each_entry(column, |entry| {
        out.extend_from_slice(&(xxh3_64(entry) % buckets).to_ne_bytes());
    });
    Ok(out)
}

/// Window positions grouped by key, with the form of their keys, owned and checked.
pub struct GroupSpec {
    prefix: Vec<u8>,
    hex_width: usize,
    heads: Vec<u64>,
    bounds: Vec<usize>,
    rows: Vec<usize>,
}

impl GroupSpec {
    /// Groups from the bytes of their arrays, checked against columns of `positions_held` entries.
    ///
    /// # Errors
    /// `Error::Value` for a key form, array or group out of range.
    pub fn new(
        prefix: Vec<u8>,
        hex_width: usize,
        (heads, bounds, rows): (&[u8], &[u8], &[u8]),
        positions_held: usize,
    ) -> Result<Self, Error> {
        if hex_width > MAX_HEX_WIDTH {
            return Err(value(format!(
                "hex_width must be at most {MAX_HEX_WIDTH}, got {hex_width}"
            )));
        }
        let spec = Self {
            prefix,
            hex_width,
            heads: words(heads, "heads")?,
            bounds: positions(bounds, "bounds")?,
            rows: positions(rows, "rows")?,
        };
        spec.groups()
            .check(positions_held)
            .map_err(|refusal| match refusal {
                Refusal::Bounds => {
                    value("bounds must rise from 0 to len(rows), one per head and one more")
                }
                Refusal::Row(row) => value(format!(
                    "row {row} is past the columns' {positions_held} entries"
                )),
            })?;
        Ok(spec)
    }

    /// The groups, for `resp`.
    pub fn groups(&self) -> Groups<'_> {
        Groups {
            heads: &self.heads,
            bounds: &self.bounds,
            rows: &self.rows,
        }
    }

    /// The form of their keys, for `resp`.
    pub fn form(&self) -> KeyForm<'_> {
        KeyForm {
            prefix: &self.prefix,
            hex_width: self.hex_width,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn array(values: &[u64]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_ne_bytes()).collect()
    }

    #[test]
    fn numbers_and_positions_are_read_and_checked() {
        assert_eq!(words(&array(&[1, u64::MAX]), "x"), Ok(vec![1, u64::MAX]));
        assert_eq!(
            words(&[0; 7], "heads"),
            Err(Error::Value(String::from("heads must hold 8-byte numbers")))
        );
        assert_eq!(positions(&array(&[3, 0]), "rows"), Ok(vec![3, 0]));
        assert_eq!(ends_bytes([2usize, 5].into_iter()), array(&[2, 5]));
    }

    #[test]
    fn a_packed_column_round_trips_and_its_ends_are_checked() {
        let (data, ends) = pack_entries([&b"ab"[..], b"", b"cde"]);
        assert_eq!(data, b"abcde");
        assert_eq!(ends, array(&[2, 2, 5]));
        let held = packed_ends(&data, &ends).unwrap();
        let mut seen = Vec::new();
        for_each_entry(
            &Column::Packed {
                data: &data,
                ends: &held,
            },
            |e| seen.push(e.to_vec()),
        );
        assert_eq!(seen, [b"ab".to_vec(), b"".to_vec(), b"cde".to_vec()]);
        let refused = Err(Error::Value(String::from(
            "a column's ends must rise within its data",
        )));
        assert_eq!(packed_ends(&data, &array(&[3, 2])), refused);
        assert_eq!(packed_ends(&data, &array(&[6])), refused);
    }

    #[test]
    fn stored_fingerprints_are_their_decimals_and_buckets_their_hashes() {
        let values = [u64::MAX, 7];
        let column = Column::Stored {
            values: &values,
            signed: true,
        };
        let mut seen = Vec::new();
        for_each_entry(&column, |e| seen.push(e.to_vec()));
        assert_eq!(seen, [b"-1".to_vec(), b"7".to_vec()]);
        let numbers = buckets(&column, 10).unwrap();
        assert_eq!(numbers, array(&[xxh3_64(b"-1") % 10, xxh3_64(b"7") % 10]));
        assert_eq!(
            buckets(&column, 0),
            Err(Error::Value(String::from("buckets must be at least 1")))
        );
    }

    #[test]
    fn groups_are_checked_against_the_columns() {
        let heads = array(&[5, 6]);
        let ok = GroupSpec::new(
            b"p:".to_vec(),
            4,
            (&heads, &array(&[0, 1, 3]), &array(&[2, 0, 1])),
            3,
        );
        assert!(ok.is_ok());
        let bad_bounds = GroupSpec::new(
            b"p:".to_vec(),
            4,
            (&heads, &array(&[0, 3]), &array(&[2, 0, 1])),
            3,
        );
        assert_eq!(
            bad_bounds.err(),
            Some(Error::Value(String::from(
                "bounds must rise from 0 to len(rows), one per head and one more"
            )))
        );
        let bad_row = GroupSpec::new(
            b"p:".to_vec(),
            4,
            (&heads, &array(&[0, 1, 3]), &array(&[2, 0, 3])),
            3,
        );
        assert_eq!(
            bad_row.err(),
            Some(Error::Value(String::from(
                "row 3 is past the columns' 3 entries"
            )))
        );
        let wide = GroupSpec::new(
            b"p:".to_vec(),
            17,
            (&heads, &array(&[0, 1, 3]), &array(&[2, 0, 1])),
            3,
        );
        assert_eq!(
            wide.err(),
            Some(Error::Value(String::from(
                "hex_width must be at most 16, got 17"
            )))
        );
    }
}
