//! Tokenisation of normalised text (`tokens.tokenize`), chunking (`tokens.split_chunks`) and the
//! whitespace collapse of "chars" features (`tokens.collapse_whitespace`).

use crate::unicode::{Norm, CJK, LETTER, MARK};

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of an ASCII word where the byte is >= `lo` (bytes below 0x80 only).
#[inline(always)]
const fn at_least(word: u64, lo: u8) -> u64 {
    word.wrapping_add(ONES * (0x80 - lo as u64)) & HIGH
}

/// The high bits of a word's bytes gathered into 8 bits, byte i to bit i.
#[inline(always)]
const fn gather(high: u64) -> u64 {
    ((high >> 7).wrapping_mul(0x0102_0408_1020_4080)) >> 56
}

/// Bit i set where byte i of an ASCII word is a letter or digit, and where it is an upper-case letter.
#[inline(always)]
fn classify8(word: u64) -> (u64, u64) {
    let digit = at_least(word, b'0') & !at_least(word, b'9' + 1);
    let lower = word | (ONES * 0x20);
    let alpha = at_least(lower, b'a') & !at_least(lower, b'z' + 1);
    let upper = at_least(word, b'A') & !at_least(word, b'Z' + 1);
    (gather(digit | alpha), gather(upper))
}

/// Bits `lo..hi` of a word (lo <= hi <= 64).
#[inline(always)]
fn bits(lo: u32, hi: u32) -> u64 {
    let below_hi = if hi >= 64 { u64::MAX } else { (1u64 << hi) - 1 };
    below_hi & !((1u64 << lo) - 1)
}

/// Call `run(start, end, upper)` for each run of letters and digits of an ASCII text, in order, with
/// whether it holds a capital letter.
///
/// The text is classified 64 bytes at a time (eight bytes per word arithmetic); runs are found at the
/// transitions of the letter-or-digit mask.
#[inline(always)]
pub fn ascii_runs(text: &[u8], mut run: impl FnMut(usize, usize, bool)) {
    let mut carry = 0u64;
    let mut in_run = false;
    let mut start = 0usize;
    let mut lo = 0u32;
    let mut upper_seen = false;
    for (block, bytes) in text.chunks(64).enumerate() {
        let base = block * 64;
        let (mut word_mask, mut upper_mask) = (0u64, 0u64);
        for (i, piece) in bytes.chunks(8).enumerate() {
            let word = match <[u8; 8]>::try_from(piece) {
                Ok(full) => full,
                Err(_) => {
                    let mut word = [0u8; 8];
                    for (to, &from) in word.iter_mut().zip(piece) {
                        *to = from;
                    }
                    word
                }
            };
            let (alnum, upper) = classify8(u64::from_le_bytes(word) & !HIGH);
            word_mask |= alnum << (8 * i);
            upper_mask |= upper << (8 * i);
        }
        let mut edges = word_mask ^ ((word_mask << 1) | carry);
        carry = word_mask >> 63;
        while edges != 0 {
            let off = edges.trailing_zeros();
            edges &= edges - 1;
            if in_run {
                upper_seen |= upper_mask & bits(lo, off) != 0;
                run(start, base + off as usize, upper_seen);
                in_run = false;
            } else {
                start = base + off as usize;
                lo = off;
                upper_seen = false;
                in_run = true;
            }
        }
        if in_run {
            upper_seen |= upper_mask & bits(lo, 64) != 0;
            lo = 0;
        }
    }
    if in_run {
        run(start, text.len(), upper_seen);
    }
}

/// The length of the ASCII prefix of some bytes.
#[inline(always)]
pub fn ascii_prefix(bytes: &[u8]) -> usize {
    let mut n = 0;
    let mut words = bytes.chunks_exact(8);
    for chunk in &mut words {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let high = u64::from_le_bytes(word) & HIGH;
        if high != 0 {
            return n + (high.trailing_zeros() / 8) as usize;
        }
        n += 8;
    }
    n + words
        .remainder()
        .iter()
        .take_while(|b| b.is_ascii())
        .count()
}

/// Call `sink` with each token of an ASCII text, lower-cased: the runs of letters and digits.
pub fn ascii_tokens(text: &[u8], buf: &mut Vec<u8>, mut sink: impl FnMut(&[u8])) {
    ascii_runs(text, |start, end, upper| {
        emit(
            text.get(start..end).unwrap_or_default(),
            upper,
            buf,
            &mut sink,
        );
    });
}

#[inline(always)]
fn emit(token: &[u8], upper: bool, buf: &mut Vec<u8>, sink: &mut impl FnMut(&[u8])) {
    if upper {
        buf.clear();
        buf.extend(token.iter().map(u8::to_ascii_lowercase));
        sink(buf);
    } else {
        sink(token);
    }
}

/// The UTF-8 encoding of a code point in a small array, and its length.
#[inline(always)]
pub fn utf8_array(cp: u32) -> ([u8; 4], usize) {
    if cp < 0x80 {
        ([cp as u8, 0, 0, 0], 1)
    } else if cp < 0x800 {
        ([0xC0 | (cp >> 6) as u8, 0x80 | (cp & 0x3F) as u8, 0, 0], 2)
    } else if cp < 0x10000 {
        (
            [
                0xE0 | (cp >> 12) as u8,
                0x80 | ((cp >> 6) & 0x3F) as u8,
                0x80 | (cp & 0x3F) as u8,
                0,
            ],
            3,
        )
    } else {
        (
            [
                0xF0 | ((cp >> 18) & 0x07) as u8,
                0x80 | ((cp >> 12) & 0x3F) as u8,
                0x80 | ((cp >> 6) & 0x3F) as u8,
                0x80 | (cp & 0x3F) as u8,
            ],
            4,
        )
    }
}

/// Append the UTF-8 encoding of a code point (any value below 0x110000; surrogates as 3 bytes).
#[inline(always)]
pub fn push_utf8(buf: &mut Vec<u8>, cp: u32) {
    let (bytes, len) = utf8_array(cp);
    buf.extend_from_slice(bytes.get(..len).unwrap_or_default());
}

/// The tokeniser's state over the code points of a normalised text: each CJK letter is a token alone,
/// each maximal run of letters (with the marks that follow a letter) a word; marks elsewhere are
/// dropped and separators only separate.
#[derive(Default)]
pub struct Tokenizer {
    in_word: bool,
    after_letter: bool,
}

impl Tokenizer {
    /// Take one code point of the given class; `buf` holds the word being built.
    #[inline(always)]
    pub fn push(&mut self, cp: u32, class: u8, buf: &mut Vec<u8>, sink: &mut impl FnMut(&[u8])) {
        match class {
            LETTER => {
                push_utf8(buf, cp);
                self.in_word = true;
                self.after_letter = true;
            }
            MARK => {
                if self.after_letter {
                    push_utf8(buf, cp);
                }
            }
            _ => {
                if self.in_word {
                    sink(buf);
                    buf.clear();
                    self.in_word = false;
                }
                self.after_letter = false;
                if class == CJK {
                    let (bytes, len) = utf8_array(cp);
                    sink(bytes.get(..len).unwrap_or_default());
                }
            }
        }
    }

    /// End of text: emit the word being built, if any.
    pub fn finish(&mut self, buf: &mut Vec<u8>, sink: &mut impl FnMut(&[u8])) {
        if self.in_word {
            sink(buf);
            buf.clear();
            self.in_word = false;
        }
        self.after_letter = false;
    }
}

/// Call `sink` with the UTF-8 of each token of a normalised text, in text order (see `Tokenizer`).
pub fn norm_tokens(norm: &Norm, buf: &mut Vec<u8>, mut sink: impl FnMut(&[u8])) {
    let mut tokenizer = Tokenizer::default();
    buf.clear();
    for (&cp, &class) in norm.cps.iter().zip(&norm.cls) {
        tokenizer.push(cp, class, buf, &mut sink);
    }
    tokenizer.finish(buf, &mut sink);
}

/// Whether a normalised text has a token: a letter or digit (CJK or not).
pub fn has_token(norm: &Norm) -> bool {
    norm.cls.iter().any(|&c| c == LETTER || c == CJK)
}

/// Whether `tokens._SAFE_CUT` matches a code point: ASCII other than letters and digits, 、 and 。,
/// and the CJK unified ideographs U+4E00-9FFF.
#[inline(always)]
fn safe_cut(ch: char) -> bool {
    let cp = u32::from(ch);
    (cp < 0x80 && !ch.is_ascii_alphanumeric())
        || cp == 0x3001
        || cp == 0x3002
        || (0x4E00..=0x9FFF).contains(&cp)
}

/// `tokens.split_chunks`: consecutive pieces of a raw text, each cut just before the first safe
/// character found at or after `size` characters (`size` is `max(1, CHUNK_CHARS)`).
pub fn split_chunks(text: &str, size: usize) -> Vec<&str> {
    let size = size.max(1);
    if text.len() <= size {
        return vec![text];
    }
    let total = text.chars().count();
    let mut pieces = Vec::new();
    let mut start_byte = 0;
    let mut start_char = 0;
    while total - start_char > size {
        let rest = text.get(start_byte..).unwrap_or_default();
        let found = rest
            .char_indices()
            .enumerate()
            .skip(size)
            .find(|&(_, (_, ch))| safe_cut(ch))
            .map(|(count, (offset, _))| (count, offset));
        let Some((count, offset)) = found else {
            break;
        };
        pieces.push(rest.get(..offset).unwrap_or_default());
        start_byte += offset;
        start_char += count;
    }
    pieces.push(text.get(start_byte..).unwrap_or_default());
    pieces
}

/// `" ".join(norm.split())`: each whitespace run made one space, both ends stripped.
pub fn collapse(cps: &[u32], mut is_space: impl FnMut(u32) -> bool, out: &mut Vec<u32>) {
    out.clear();
    let mut gap = false;
    for &cp in cps {
        if is_space(cp) {
            gap = true;
        } else {
            if gap && !out.is_empty() {
                out.push(0x20);
            }
            gap = false;
            out.push(cp);
        }
    }
}

/// Replace each surrogate (encoded by "surrogatepass" as ED A0-BF 80-BF) by U+FFFD.
pub fn replace_surrogates(data: &[u8]) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unicode::SEPARATOR;

    fn ascii(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut buf = Vec::new();
        ascii_tokens(text.as_bytes(), &mut buf, |t| {
            out.push(String::from_utf8_lossy(t).into_owned())
        });
        out
    }

    fn naive(text: &str) -> Vec<String> {
        text.split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|t| !t.is_empty())
            .map(str::to_ascii_lowercase)
            .collect()
    }

    #[test]
    fn ascii_tokens_match_naive_split() {
        let mut state = 7u64;
        let alphabet = b"aZ9 _-.\n\x00\x7fQz0@[`{";
        for len in 0..300 {
            let text: String = (0..len)
                .map(|_| {
                    state = crate::hash::mix(state.wrapping_add(1));
                    char::from(alphabet[(state % alphabet.len() as u64) as usize])
                })
                .collect();
            assert_eq!(ascii(&text), naive(&text), "{text:?}");
        }
        let long = "Word ".repeat(100) + &"x".repeat(130) + "END";
        assert_eq!(ascii(&long), naive(&long));
    }

    #[test]
    fn ascii_prefix_stops_at_the_first_wide_byte() {
        assert_eq!(ascii_prefix(b""), 0);
        assert_eq!(ascii_prefix("abcdefghij".as_bytes()), 10);
        assert_eq!(ascii_prefix("abcdefghé".as_bytes()), 8);
        assert_eq!(ascii_prefix("abcé".as_bytes()), 3);
        assert_eq!(ascii_prefix("é".as_bytes()), 0);
    }

    #[test]
    fn ascii_tokens_split_and_lower() {
        assert_eq!(
            ascii("Don't 3.14 HeLLo_world"),
            ["don", "t", "3", "14", "hello", "world"]
        );
        assert!(ascii("  !!! ").is_empty());
        assert_eq!(ascii("x"), ["x"]);
    }

    #[test]
    fn marks_follow_letters_only() {
        // a, mark, sep, mark, CJK, mark, b
        let norm = Norm {
            cps: vec![0x61, 0x301, 0x20, 0x301, 0x4E2D, 0x301, 0x62],
            cls: vec![LETTER, MARK, SEPARATOR, MARK, CJK, MARK, LETTER],
        };
        let mut out = Vec::new();
        let mut buf = Vec::new();
        norm_tokens(&norm, &mut buf, |t| {
            out.push(String::from_utf8(t.to_vec()).unwrap_or_default())
        });
        assert_eq!(out, ["a\u{301}", "中", "b"]);
    }

    #[test]
    fn chunks_cut_before_safe_characters() {
        assert_eq!(split_chunks("abc def", 1), ["abc", " def"]);
        assert_eq!(split_chunks("abcdef", 2), ["abcdef"]);
        assert_eq!(split_chunks("", 1), [""]);
        assert_eq!(split_chunks("ab,cd,ef", 3), ["ab,cd", ",ef"]);
        assert_eq!(split_chunks("中中中", 1), ["中", "中", "中"]);
    }

    #[test]
    fn collapse_whitespace() {
        let cps: Vec<u32> = "  a  b c ".chars().map(u32::from).collect();
        let mut out = Vec::new();
        collapse(&cps, |c| c == 0x20, &mut out);
        assert_eq!(out, "a b c".chars().map(u32::from).collect::<Vec<_>>());
    }

    #[test]
    fn surrogates_become_replacement_characters() {
        // "a\ud800b" as "surrogatepass" encodes it.
        assert_eq!(replace_surrogates(b"a\xed\xa0\x80b"), "a\u{FFFD}b");
        assert_eq!(replace_surrogates("caf\u{e9}".as_bytes()), "caf\u{e9}");
    }
}
