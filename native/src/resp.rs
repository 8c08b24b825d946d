//! The RESP form of the bulk path's grouped commands (`simhash_redis/store/grouped.py`), byte for byte
//! as its pure packer writes them: one command per group of window positions, each group's key built
//! from its value, the commands cut into chunks of at least `chunk_args` arguments.

/// How a group's value becomes its key: the key's prefix, then the value in lowercase hexadecimal
/// padded with zeros to `hex_width` digits (a table bucket), or in decimal when `hex_width` is 0 (a map
/// bucket).
pub struct KeyForm<'a> {
    pub prefix: &'a [u8],
    pub hex_width: usize,
}

/// Window positions grouped by key: `rows[bounds[j]..bounds[j + 1]]` are group j's positions, in the
/// order their entries go into its command, and `heads[j]` its key's value.
pub struct Groups<'a> {
    pub heads: &'a [u64],
    pub bounds: &'a [usize],
    pub rows: &'a [usize],
}

/// Why a request cannot be packed (the boundary turns it into a ValueError).
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    Bounds,
    Row(usize),
}

impl Groups<'_> {
    /// Checks that the bounds rise from 0 to the number of rows, one more than the heads, and that
    /// every row is a position of a column of `positions` entries.
    pub fn check(&self, positions: usize) -> Result<(), Refusal> {
        let bounds = self.bounds;
        let rising = bounds.windows(2).all(|pair| pair[0] <= pair[1]);
        if bounds.len() != self.heads.len() + 1
            || bounds.first() != Some(&0)
            || bounds.last() != Some(&self.rows.len())
            || !rising
        {
            return Err(Refusal::Bounds);
        }
        match self.rows.iter().find(|&&row| row >= positions) {
            Some(&row) => Err(Refusal::Row(row)),
            None => Ok(()),
        }
    }

    pub fn len(&self) -> usize {
        self.heads.len()
    }

    fn rows_of(&self, j: usize) -> &[usize] {
        &self.rows[self.bounds[j]..self.bounds[j + 1]]
    }
}

/// Appends `value` in decimal.
pub fn decimal(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
}

fn decimal_len(value: u64) -> usize {
    value.checked_ilog10().map_or(1, |log| log as usize + 1)
}

/// Appends `$<len>\r\n<data>\r\n`.
pub fn bulk(out: &mut Vec<u8>, data: &[u8]) {
    out.push(b'$');
    decimal(out, data.len() as u64);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

fn header(out: &mut Vec<u8>, count: usize) {
    out.push(b'*');
    decimal(out, count as u64);
    out.extend_from_slice(b"\r\n");
}

fn key(out: &mut Vec<u8>, form: &KeyForm<'_>, value: u64) {
    let mut text = Vec::with_capacity(form.prefix.len() + 20);
    text.extend_from_slice(form.prefix);
    if form.hex_width == 0 {
        decimal(&mut text, value);
    } else {
        text.extend_from_slice(format!("{value:0width$x}", width = form.hex_width).as_bytes());
    }
    bulk(out, &text);
}

/// One entry per window position.
#[derive(Clone, Copy)]
pub enum Column<'a> {
    /// Entries packed end to end: entry i is `data[ends[i - 1]..ends[i]]` (from 0 for the first).
    Packed { data: &'a [u8], ends: &'a [usize] },
    /// Fingerprints of at most 64 bits, whose entries are their stored forms (`stored_digits`), written
    /// as they are packed: no column of text to build first.
    Stored { values: &'a [u64], signed: bool },
}

impl<'a> Column<'a> {
    /// Whether a packed column's ends rise within its data.
    pub fn is_valid(&self) -> bool {
        match self {
            Column::Packed { data, ends } => {
                ends.windows(2).all(|pair| pair[0] <= pair[1])
                    && ends.last().is_none_or(|&end| end <= data.len())
            }
            Column::Stored { .. } => true,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Column::Packed { ends, .. } => ends.len(),
            Column::Stored { values, .. } => values.len(),
        }
    }

    /// Entry i of a packed column (empty for a column of fingerprints).
    pub fn get(&self, i: usize) -> &'a [u8] {
        match self {
            Column::Packed { data, ends } => {
                let start = if i == 0 { 0 } else { ends[i - 1] };
                &data[start..ends[i]]
            }
            Column::Stored { .. } => &[],
        }
    }
}

/// A column's entries at some positions, read in a tight loop before they are written: the positions
/// are random and the columns larger than the caches, and loads that do not wait for each other overlap.
pub enum Fetched<'a> {
    /// A packed column's data, and where each entry starts and ends in it.
    Spans(&'a [u8], Vec<(usize, usize)>),
    /// Fingerprints, and whether their stored forms are signed.
    Values(Vec<u64>, bool),
}

impl Fetched<'_> {
    /// The k-th entry (a fingerprint's stored form is written into `digits`).
    pub fn entry<'b>(&'b self, k: usize, digits: &'b mut itoa::Buffer) -> &'b [u8] {
        match self {
            Fetched::Spans(data, spans) => &data[spans[k].0..spans[k].1],
            Fetched::Values(values, signed) => stored_digits(values[k], *signed, digits),
        }
    }

    /// Appends the k-th entry as a RESP bulk string.
    pub fn write(&self, out: &mut Vec<u8>, k: usize) {
        bulk(out, self.entry(k, &mut itoa::Buffer::new()));
    }
}

impl<'a> Column<'a> {
    /// The entries at `rows` (for a packed column, where they start and end; their first bytes are
    /// loaded as well).
    pub fn fetch(&self, rows: &[usize]) -> Fetched<'a> {
        match *self {
            Column::Packed { data, ends } => Fetched::Spans(
                data,
                rows.iter()
                    .map(|&row| {
                        let start = if row == 0 { 0 } else { ends[row - 1] };
                        std::hint::black_box(data.get(start).copied());
                        (start, ends[row])
                    })
                    .collect(),
            ),
            Column::Stored { values, signed } => {
                Fetched::Values(rows.iter().map(|&row| values[row]).collect(), signed)
            }
        }
    }
}

/// A chunk of commands: its RESP bytes, how many commands it holds, and the group it stopped before.
pub struct Chunk {
    pub data: Vec<u8>,
    pub commands: usize,
    pub next: usize,
}

/// The chunk that starts at group `from`: for each group, `head` (the RESP of its `head_args`
/// arguments), the group's key, then for each of its positions that position's entry of every column,
/// in column order; it ends after the command that brings it to `chunk_args` arguments.
pub fn pack_groups(
    head: &[u8],
    head_args: usize,
    form: &KeyForm<'_>,
    groups: &Groups<'_>,
    columns: &[Column<'_>],
    from: usize,
    chunk_args: usize,
) -> Chunk {
    let mut chunk = Chunk {
        data: Vec::new(),
        commands: 0,
        next: from,
    };
    let mut args = 0;
    let mut end = from;
    while end < groups.len() && (end == from || args < chunk_args) {
        args += head_args + 1 + groups.rows_of(end).len() * columns.len();
        end += 1;
    }
    let first = groups.bounds.get(from).copied().unwrap_or(0);
    let rows = &groups.rows[first..groups.bounds.get(end).copied().unwrap_or(first)];
    let fetched: Vec<Fetched> = columns.iter().map(|column| column.fetch(rows)).collect();
    let out = &mut chunk.data;
    for j in from..end {
        let count = head_args + 1 + groups.rows_of(j).len() * columns.len();
        header(out, count);
        out.extend_from_slice(head);
        key(out, form, groups.heads[j]);
        for k in groups.bounds[j] - first..groups.bounds[j + 1] - first {
            for entries in &fetched {
                entries.write(out, k);
            }
        }
    }
    chunk.commands = end - from;
    chunk.next = end;
    chunk
}

/// The id list a fingerprint's entry gets: the one given for its position, else the netstring of the
/// position's id (`<len>:<id>`).
pub struct Lists<'a> {
    pub ids: Column<'a>,
    pub joined: Vec<(usize, &'a [u8])>,
}

impl Lists<'_> {
    /// Appends the id list of the k-th of `rows`, whose ids were fetched as `ids`.
    fn write(&self, out: &mut Vec<u8>, row: usize, ids: &Fetched<'_>, k: usize) {
        if let Ok(at) = self
            .joined
            .binary_search_by_key(&row, |&(position, _)| position)
        {
            bulk(out, self.joined[at].1);
            return;
        }
        let mut digits = itoa::Buffer::new();
        let id = ids.entry(k, &mut digits);
        let len = id.len() as u64;
        out.push(b'$');
        decimal(out, (decimal_len(len) + 1 + id.len()) as u64);
        out.extend_from_slice(b"\r\n");
        decimal(out, len);
        out.push(b':');
        out.extend_from_slice(id);
        out.extend_from_slice(b"\r\n");
    }
}

/// A script called on runs of groups, as its calls name it: its SHA1, and the key named after the
/// groups' keys in each call, if any (the counts hash on a standalone server: the script moves it).
pub struct ScriptCalls<'a> {
    pub sha: &'a [u8],
    pub counts: Option<&'a [u8]>,
}

impl ScriptCalls<'_> {
    /// Appends a call's head: `EVALSHA sha <numkeys>`, the keys of groups `start..end`, the counts key.
    fn head(&self, out: &mut Vec<u8>, count: usize, form: &KeyForm<'_>, heads: &[u64]) {
        header(out, count);
        bulk(out, b"EVALSHA");
        bulk(out, self.sha);
        let mut numkeys = Vec::new();
        decimal(
            &mut numkeys,
            (heads.len() + usize::from(self.counts.is_some())) as u64,
        );
        bulk(out, &numkeys);
        for &head in heads {
            key(out, form, head);
        }
        if let Some(counts) = self.counts {
            bulk(out, counts);
        }
    }

    /// The keys a call of `groups` groups names.
    fn keys(&self, groups: usize) -> usize {
        groups + usize::from(self.counts.is_some())
    }
}

/// The groups `from..` of a call that holds `call_entries` positions (one group at the least).
fn run_end(groups: &Groups<'_>, from: usize, call_entries: usize) -> (usize, usize) {
    let (mut end, mut entries) = (from, 0);
    while end < groups.len() && (end == from || entries < call_entries) {
        entries += groups.rows_of(end).len();
        end += 1;
    }
    (end, entries)
}

/// The chunk of calls of a script that starts at group `from`: each call takes a run of groups holding
/// `call_entries` positions and names their keys (then `ScriptCalls::counts`); its argv gives, for
/// each group in turn, its size, then for each of its positions that position's entry of every
/// column; the chunk ends after the call that brings it to `chunk_args` arguments.
pub fn pack_runs(
    script: &ScriptCalls<'_>,
    form: &KeyForm<'_>,
    groups: &Groups<'_>,
    columns: &[Column<'_>],
    call_entries: usize,
    from: usize,
    chunk_args: usize,
) -> Chunk {
    let mut chunk = Chunk {
        data: Vec::new(),
        commands: 0,
        next: from,
    };
    let mut args = 0;
    while chunk.next < groups.len() && (chunk.commands == 0 || args < chunk_args) {
        let start = chunk.next;
        let (end, entries) = run_end(groups, start, call_entries);
        let count = 3 + script.keys(end - start) + (end - start) + entries * columns.len();
        let out = &mut chunk.data;
        script.head(out, count, form, &groups.heads[start..end]);
        let first = groups.bounds[start];
        let rows = &groups.rows[first..groups.bounds[end]];
        let fetched: Vec<Fetched> = columns.iter().map(|column| column.fetch(rows)).collect();
        for j in start..end {
            let (from, to) = (groups.bounds[j] - first, groups.bounds[j + 1] - first);
            let mut size = Vec::new();
            decimal(&mut size, (to - from) as u64);
            bulk(out, &size);
            for k in from..to {
                for entries in &fetched {
                    entries.write(out, k);
                }
            }
        }
        args += count;
        chunk.commands += 1;
        chunk.next = end;
    }
    chunk
}

/// The chunk of store/lua/bulk_fp.lua calls that starts at group `from`: `EVALSHA sha <keys> <key>...
/// <argv>`, a run of groups per call until it holds `call_pairs` entries, where each group gives its key
/// and, in argv, its size, its fingerprints, then each fingerprint again with its id list; the chunk
/// ends after the call that brings it to `chunk_args` arguments.
#[allow(clippy::too_many_arguments)] // one chunk of the Python function's calls
pub fn pack_attach(
    script: &ScriptCalls<'_>,
    form: &KeyForm<'_>,
    groups: &Groups<'_>,
    fps: Column<'_>,
    lists: &Lists<'_>,
    call_pairs: usize,
    from: usize,
    chunk_args: usize,
) -> Chunk {
    let mut chunk = Chunk {
        data: Vec::new(),
        commands: 0,
        next: from,
    };
    let mut args = 0;
    while chunk.next < groups.len() && (chunk.commands == 0 || args < chunk_args) {
        let start = chunk.next;
        let (end, pairs) = run_end(groups, start, call_pairs);
        let count = 3 + script.keys(end - start) + (end - start) + 3 * pairs;
        let out = &mut chunk.data;
        script.head(out, count, form, &groups.heads[start..end]);
        let first = groups.bounds[start];
        let rows = &groups.rows[first..groups.bounds[end]];
        let (fetched, ids) = (fps.fetch(rows), lists.ids.fetch(rows));
        for j in start..end {
            let (from, to) = (groups.bounds[j] - first, groups.bounds[j + 1] - first);
            let mut size = Vec::new();
            decimal(&mut size, (to - from) as u64);
            bulk(out, &size);
            for k in from..to {
                fetched.write(out, k);
            }
            for (k, &row) in rows.iter().enumerate().take(to).skip(from) {
                fetched.write(out, k);
                lists.write(out, row, &ids, k);
            }
        }
        args += count;
        chunk.commands += 1;
        chunk.next = end;
    }
    chunk
}

/// A fingerprint's stored form: its decimal, signed as an i64 when `signed` (f = 64).
pub fn stored_digits(value: u64, signed: bool, digits: &mut itoa::Buffer) -> &[u8] {
    if signed {
        digits.format(value as i64).as_bytes()
    } else {
        digits.format(value).as_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(value: u64, signed: bool) -> Vec<u8> {
        stored_digits(value, signed, &mut itoa::Buffer::new()).to_vec()
    }

    #[test]
    fn decimals_and_signed_forms() {
        assert_eq!(stored(0, true), b"0");
        assert_eq!(stored(u64::MAX, true), b"-1");
        assert_eq!(stored(1 << 63, true), b"-9223372036854775808");
        assert_eq!(stored(u64::MAX, false), b"18446744073709551615");
        assert_eq!(decimal_len(0), 1);
        assert_eq!(decimal_len(9), 1);
        assert_eq!(decimal_len(10), 2);
    }

    fn all_chunks(mut pack: impl FnMut(usize) -> Chunk) -> Vec<(Vec<u8>, usize)> {
        let mut out = Vec::new();
        let mut next = 0;
        loop {
            let chunk = pack(next);
            if chunk.commands == 0 {
                return out;
            }
            next = chunk.next;
            out.push((chunk.data, chunk.commands));
        }
    }

    #[test]
    fn columns_slice_their_entries() {
        let column = Column::Packed {
            data: b"abbc",
            ends: &[1, 3, 3, 4],
        };
        assert!(column.is_valid());
        assert_eq!(
            (column.get(0), column.get(1), column.get(2), column.get(3)),
            (&b"a"[..], &b"bb"[..], &b""[..], &b"c"[..])
        );
        assert!(!Column::Packed {
            data: b"ab",
            ends: &[1, 3]
        }
        .is_valid());
        assert!(!Column::Packed {
            data: b"ab",
            ends: &[2, 1]
        }
        .is_valid());
    }

    #[test]
    fn one_group_per_command_and_chunks_cut_after_the_threshold() {
        let form = KeyForm {
            prefix: b"t0:",
            hex_width: 4,
        };
        let groups = Groups {
            heads: &[1, 0xabc],
            bounds: &[0, 1, 3],
            rows: &[2, 0, 1],
        };
        let column = Column::Packed {
            data: b"abbc",
            ends: &[1, 3, 4],
        };
        let chunks = all_chunks(|from| {
            pack_groups(b"$4\r\nSADD\r\n", 1, &form, &groups, &[column], from, 3)
        });
        assert_eq!(chunks.len(), 2);
        assert_eq!(
            chunks[0],
            (
                b"*3\r\n$4\r\nSADD\r\n$7\r\nt0:0001\r\n$1\r\nc\r\n".to_vec(),
                1
            )
        );
        assert_eq!(
            chunks[1],
            (
                b"*4\r\n$4\r\nSADD\r\n$7\r\nt0:0abc\r\n$1\r\na\r\n$2\r\nbb\r\n".to_vec(),
                1
            )
        );
    }

    #[test]
    fn bad_groups_are_refused() {
        let groups = Groups {
            heads: &[1],
            bounds: &[0, 2],
            rows: &[0, 5],
        };
        assert_eq!(groups.check(3), Err(Refusal::Row(5)));
        let groups = Groups {
            heads: &[1],
            bounds: &[0, 3],
            rows: &[0, 1],
        };
        assert_eq!(groups.check(3), Err(Refusal::Bounds));
    }

    #[test]
    fn script_runs_give_each_groups_size_and_entries() {
        let form = KeyForm {
            prefix: b"id:",
            hex_width: 0,
        };
        let groups = Groups {
            heads: &[3, 7],
            bounds: &[0, 2, 3],
            rows: &[2, 0, 1],
        };
        let ids = Column::Packed {
            data: b"abc",
            ends: &[1, 2, 3],
        };
        let fps = Column::Stored {
            values: &[5, 6, 7],
            signed: false,
        };
        let script = ScriptCalls {
            sha: b"sha",
            counts: Some(b"n"),
        };
        let columns = [ids, fps];
        let one = all_chunks(|from| pack_runs(&script, &form, &groups, &columns, 8, from, 1000));
        let expected = b"*14\r\n$7\r\nEVALSHA\r\n$3\r\nsha\r\n$1\r\n3\r\n$4\r\nid:3\r\n$4\r\nid:7\r\n$1\r\nn\r\n\
$1\r\n2\r\n$1\r\nc\r\n$1\r\n7\r\n$1\r\na\r\n$1\r\n5\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n6\r\n";
        assert_eq!(one, vec![(expected.to_vec(), 1)]);
        // A call per group when each holds the entries a call takes; one chunk of both.
        let two = all_chunks(|from| pack_runs(&script, &form, &groups, &columns, 1, from, 1000));
        assert_eq!(two.len(), 1);
        assert_eq!(two[0].1, 2);
    }

    #[test]
    fn attach_calls_hold_runs_of_groups() {
        let form = KeyForm {
            prefix: b"fp:",
            hex_width: 0,
        };
        let groups = Groups {
            heads: &[3, 7],
            bounds: &[0, 1, 2],
            rows: &[0, 1],
        };
        let fps = Column::Stored {
            values: &[5, 6],
            signed: true,
        };
        let lists = Lists {
            ids: Column::Packed {
                data: b"xyz",
                ends: &[1, 3],
            },
            joined: vec![(1, b"2:yz1:w".as_slice())],
        };
        let script = ScriptCalls {
            sha: b"sha",
            counts: None,
        };
        let chunks =
            all_chunks(|from| pack_attach(&script, &form, &groups, fps, &lists, 1, from, 1000));
        assert_eq!(chunks.len(), 1);
        let expected = b"*8\r\n$7\r\nEVALSHA\r\n$3\r\nsha\r\n$1\r\n1\r\n$4\r\nfp:3\r\n$1\r\n1\r\n$1\r\n5\r\n$1\r\n5\r\n$3\r\n1:x\r\n\
*8\r\n$7\r\nEVALSHA\r\n$3\r\nsha\r\n$1\r\n1\r\n$4\r\nfp:7\r\n$1\r\n1\r\n$1\r\n6\r\n$1\r\n6\r\n$7\r\n2:yz1:w\r\n";
        assert_eq!(chunks[0], (expected.to_vec(), 2));
        // With the counts hash: one key more, after the fingerprint-map keys.
        let counted = ScriptCalls {
            sha: b"sha",
            counts: Some(b"n"),
        };
        let chunks =
            all_chunks(|from| pack_attach(&counted, &form, &groups, fps, &lists, 2, from, 1000));
        let expected = b"*14\r\n$7\r\nEVALSHA\r\n$3\r\nsha\r\n$1\r\n3\r\n$4\r\nfp:3\r\n$4\r\nfp:7\r\n$1\r\nn\r\n\
$1\r\n1\r\n$1\r\n5\r\n$1\r\n5\r\n$3\r\n1:x\r\n$1\r\n1\r\n$1\r\n6\r\n$1\r\n6\r\n$7\r\n2:yz1:w\r\n";
        assert_eq!(chunks, vec![(expected.to_vec(), 1)]);
    }
}
