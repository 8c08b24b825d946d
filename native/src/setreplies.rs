//! SMEMBERS replies read straight off the wire: RESP arrays (or RESP3 sets) of bulk strings scanned in
//! place, for the read path's candidate filter, with no Python object per member.

use crate::error::{value, Error};

/// The outcome of reading one element of a reply at a position.
#[derive(Debug, PartialEq, Eq)]
enum Step<T> {
    /// Read whole: the value and the position after it.
    Done(T, usize),
    /// The data ends before it does.
    Partial,
    /// Not of the plain shape (an error reply, a null, a push message, a nested value, ...).
    Other,
}

/// A line `digits\r\n` from `pos` (no leading zero, at most 2^32 - 1, as hiredis reads them): its value
/// and the position after it.
fn count_line(data: &[u8], pos: usize) -> Step<usize> {
    // 19 digits fit a u64 without overflow; anything above 2^32 - 1 goes to the general reader.
    const MOST_DIGITS: usize = 19;
    let rest = data.get(pos..).unwrap_or_default();
    let Some(cr) = memchr::memchr(b'\r', rest) else {
        return if rest.len() > MOST_DIGITS || !rest.iter().all(u8::is_ascii_digit) {
            Step::Other
        } else {
            Step::Partial
        };
    };
    let digits = &rest[..cr];
    if digits.is_empty()
        || digits.len() > MOST_DIGITS
        || (digits.len() > 1 && digits[0] == b'0')
        || !digits.iter().all(u8::is_ascii_digit)
    {
        return Step::Other;
    }
    match rest.get(cr + 1) {
        None => return Step::Partial,
        Some(b'\n') => {}
        Some(_) => return Step::Other,
    }
    let value = digits
        .iter()
        .fold(0u64, |v, &d| v * 10 + u64::from(d - b'0'));
    match u32::try_from(value)
        .ok()
        .and_then(|v| usize::try_from(v).ok())
    {
        Some(value) => Step::Done(value, pos + cr + 2),
        None => Step::Other,
    }
}

/// One bulk string `$len\r\n<bytes>\r\n` from `pos`: its bytes' range and the position after it.
fn bulk(data: &[u8], pos: usize) -> Step<(usize, usize)> {
    match data.get(pos) {
        None => return Step::Partial,
        Some(b'$') => {}
        Some(_) => return Step::Other,
    }
    let (len, start) = match count_line(data, pos + 1) {
        Step::Done(len, start) => (len, start),
        Step::Partial => return Step::Partial,
        Step::Other => return Step::Other,
    };
    let Some(end) = start.checked_add(len) else {
        return Step::Other;
    };
    match data.get(end..end.saturating_add(2)) {
        Some(b"\r\n") => Step::Done((start, end), end + 2),
        Some(_) => Step::Other,
        None => Step::Partial,
    }
}

/// One reply of the plain shape from `pos`: an array or set of bulk strings, or a RESP3 map of them
/// (an HGETALL's, its fields and values in turn); `visit` gets each string.
fn reply<'a>(data: &'a [u8], pos: usize, mut visit: impl FnMut(&'a [u8])) -> Step<()> {
    let per_entry = match data.get(pos) {
        None => return Step::Partial,
        Some(b'*' | b'~') => 1,
        Some(b'%') => 2,
        Some(_) => return Step::Other,
    };
    let (count, mut at) = match count_line(data, pos + 1) {
        Step::Done(count, at) => (count, at),
        Step::Partial => return Step::Partial,
        Step::Other => return Step::Other,
    };
    // count_line's counts fit in a u32, so doubling one cannot overflow a usize of 64 bits; on a
    // narrower target an overflowing count is not a reply of the plain shape.
    let Some(strings) = count.checked_mul(per_entry) else {
        return Step::Other;
    };
    for _ in 0..strings {
        match bulk(data, at) {
            Step::Done((start, end), next) => {
                visit(&data[start..end]);
                at = next;
            }
            Step::Partial => return Step::Partial,
            Step::Other => return Step::Other,
        }
    }
    Step::Done((), at)
}

/// How far whole replies of the plain shape reach from `pos`, up to `want` of them.
///
/// Returns the position after the last whole one, how many there are, and whether the next reply is of
/// another shape (then the caller reads the rest with a general RESP reader).
pub fn scan(data: &[u8], mut pos: usize, want: usize) -> (usize, usize, bool) {
    let mut found = 0;
    while found < want {
        match reply(data, pos, |_| {}) {
            Step::Done((), next) => {
                pos = next;
                found += 1;
            }
            Step::Partial => return (pos, found, false),
            Step::Other => return (pos, found, true),
        }
    }
    (pos, found, false)
}

/// The members of one whole reply of the plain shape at `pos`, given to `visit` in order: the position
/// after it, or None when the data there is not one (the candidate filter's RESP input).
pub fn members<'a>(data: &'a [u8], pos: usize, visit: impl FnMut(&'a [u8])) -> Option<usize> {
    match reply(data, pos, visit) {
        Step::Done((), next) => Some(next),
        _ => None,
    }
}

/// The value of each of `fields` in one HGETALL reply in its RESP form (a map, or an array of fields
/// and values in turn), None where the field is absent.
///
/// Only strings at field positions are compared: an id in a value that looks like a field is a value.
///
/// # Errors
/// `Error::Value` when the data is not one whole reply of strings in pairs.
pub fn hash_fields<'a, F: AsRef<[u8]>>(
    data: &'a [u8],
    fields: &[F],
) -> Result<Vec<Option<&'a [u8]>>, Error> {
    let mut strings: Vec<&[u8]> = Vec::new();
    let whole = match reply(data, 0, |s| strings.push(s)) {
        Step::Done((), end) => end == data.len() && strings.len() % 2 == 0,
        _ => false,
    };
    if !whole {
        return Err(value("not one reply of fields and values"));
    }
    Ok(fields
        .iter()
        .map(|field| {
            strings
                .chunks_exact(2)
                .find(|pair| pair[0] == field.as_ref())
                .map(|pair| pair[1])
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sets(members: &[&[&[u8]]]) -> Vec<u8> {
        let mut out = Vec::new();
        for set in members {
            out.extend_from_slice(format!("*{}\r\n", set.len()).as_bytes());
            for m in *set {
                out.extend_from_slice(format!("${}\r\n", m.len()).as_bytes());
                out.extend_from_slice(m);
                out.extend_from_slice(b"\r\n");
            }
        }
        out
    }

    #[test]
    fn whole_replies_are_found_and_a_cut_anywhere_is_partial() {
        let data = sets(&[&[b"12", b"-7"], &[], &[b"99999999999999999999"]]);
        assert_eq!(scan(&data, 0, 3), (data.len(), 3, false));
        assert_eq!(scan(&data, 0, 2).1, 2);
        for cut in 0..data.len() {
            let (end, found, other) = scan(&data[..cut], 0, 3);
            assert!(!other, "cut at {cut}");
            assert!(found < 3 && end <= cut);
        }
    }

    #[test]
    fn other_shapes_are_reported() {
        for bad in [
            &b"-WRONGTYPE x\r\n"[..],
            b"*-1\r\n",
            b"$3\r\nabc\r\n",
            b"*1\r\n:5\r\n",
            b"*1\r\n$3\r\nabcd\r\n",
            b">2\r\n",
            b"*1x\r\n",
            b"*99999999999999999999\r\n",
            b"*4294967296\r\n",
            b"*01\r\n$1\r\n5\r\n",
            b"*1\r\n$01\r\n5\r\n",
        ] {
            assert_eq!(scan(bad, 0, 1), (0, 0, true), "{bad:?}");
        }
        let mut data = sets(&[&[b"1"]]);
        data.extend_from_slice(b"-ERR\r\n");
        assert_eq!(scan(&data, 0, 2), (11, 1, true));
        assert_eq!(scan(b"~1\r\n$1\r\n5\r\n", 0, 1), (11, 1, false));
    }

    #[test]
    fn a_field_is_found_only_at_a_field_position() {
        // The second field's value is the first field's bytes: only the field itself counts.
        let map = b"%2\r\n$1\r\n5\r\n$3\r\n1:a\r\n$1\r\n7\r\n$1\r\n5\r\n";
        let mut strings = Vec::new();
        assert_eq!(
            reply(map, 0, |s| strings.push(s)),
            Step::Done((), map.len())
        );
        let pairs: Vec<_> = strings.chunks_exact(2).map(|p| (p[0], p[1])).collect();
        assert_eq!(pairs, [(&b"5"[..], &b"1:a"[..]), (&b"7"[..], &b"5"[..])]);
    }

    #[test]
    fn a_map_of_strings_is_read_as_its_fields_and_values() {
        let map = b"%1\r\n$1\r\n5\r\n$3\r\n1:a\r\n";
        assert_eq!(scan(map, 0, 1), (map.len(), 1, false));
        let mut strings = Vec::new();
        assert_eq!(
            reply(map, 0, |s| strings.push(s.to_vec())),
            Step::Done((), map.len())
        );
        assert_eq!(strings, [b"5".to_vec(), b"1:a".to_vec()]);
        for cut in 0..map.len() {
            assert_eq!(scan(&map[..cut], 0, 1), (0, 0, false), "cut at {cut}");
        }
        assert_eq!(scan(b"%1\r\n$1\r\n5\r\n:1\r\n", 0, 1), (0, 0, true));
        assert_eq!(scan(b"%0\r\n", 0, 1), (4, 1, false));
    }

    #[test]
    fn hash_fields_reads_maps_and_arrays_and_refuses_the_rest() {
        let map = b"%2\r\n$1\r\n5\r\n$3\r\n1:a\r\n$1\r\n7\r\n$1\r\n5\r\n";
        let found = hash_fields(map, &[&b"7"[..], b"5", b"9"]).unwrap();
        assert_eq!(found, [Some(&b"5"[..]), Some(&b"1:a"[..]), None]);
        let array = b"*2\r\n$1\r\n5\r\n$1\r\nx\r\n";
        assert_eq!(hash_fields(array, &[b"5"]).unwrap(), [Some(&b"x"[..])]);
        for bad in [
            &b"*1\r\n$1\r\n5\r\n"[..],
            b"*0\r\n*0\r\n",
            b"-ERR\r\n",
            b"*2\r\n$1\r\n5\r\n",
        ] {
            assert_eq!(
                hash_fields(bad, &[b"5"]),
                Err(Error::Value(String::from(
                    "not one reply of fields and values"
                ))),
                "{bad:?}"
            );
        }
        assert_eq!(members(map, 0, |_| {}), Some(map.len()));
        assert_eq!(members(b"-ERR\r\n", 0, |_| {}), None);
    }
}
