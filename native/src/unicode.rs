//! Table-driven normalisation (NFKC then casefold) and token classes, from the scheme's Unicode data.
//!
//! Nothing here knows Unicode by itself: every table comes from a
//! `simhash_redis.fingerprinting.normalize.Normalizer` (Unicode 15.1, pinned: `bmp16_tables`,
//! `bmp_classes`, `bmp_spaces`, `image_parts`) and is handed over once per process.
//! `UnicodeState::fast` gives `Normalizer.normalize`'s code points by the tables: a BMP text is mapped code point by code point through the packed table; whatever needs a
//! closer look there (astral characters, long NFKC images without cached parts, images whose casefold
//! grows, composing characters) is reported, and Python is asked by the boundary, never from here
//! (see `crate::resolver` and `crate::python`).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use crate::tokenize::{ascii_prefix, ascii_runs, push_utf8, utf8_array};

/// Token class of a code point: separator (spaces, punctuation, symbols, controls).
pub const SEPARATOR: u8 = 0;
/// Token class: a letter or digit (general category L* or N*) outside the CJK ranges.
pub const LETTER: u8 = 1;
/// Token class: a combining mark (category M*).
pub const MARK: u8 = 2;
/// Token class: a letter in `charclass.CJK_RANGES`, a token by itself.
pub const CJK: u8 = 3;

/// Code points in the BMP, the size of every table.
pub const BMP: usize = 0x10000;

/// Normalised code points and their token classes.
#[derive(Default, Debug, Clone)]
pub struct Norm {
    /// The code points of the normalised text.
    pub cps: Vec<u32>,
    /// The class of each.
    pub cls: Vec<u8>,
}

impl Norm {
    /// Empty both vectors, keeping their memory.
    pub fn clear(&mut self) {
        self.cps.clear();
        self.cls.clear();
    }

    /// The normalised form of an ASCII text: lower case, with ASCII classes.
    pub fn set_ascii(&mut self, text: &[u8]) {
        self.clear();
        for &b in text {
            let lower = b.to_ascii_lowercase();
            self.cps.push(u32::from(lower));
            self.cls.push(if lower.is_ascii_alphanumeric() {
                LETTER
            } else {
                SEPARATOR
            });
        }
    }
}

/// Whether an ASCII code point is whitespace for `str.isspace` / `str.split()`: \t \n \v \f \r, the
/// information separators 0x1C-0x1F and space (a fixed part of every Unicode version).
#[inline]
pub fn ascii_space(b: u8) -> bool {
    matches!(b, 0x09..=0x0D | 0x1C..=0x20)
}

/// The lookup tables of the running Python, for the 65,536 BMP code points.
pub struct Tables {
    /// `Normalizer.bmp16_tables[0]`: per raw code point, bits 0-15 its single NFKC image, bits 16-31
    /// that image's casefold image, bits 32-33 the latter's class, bit 34 casefold grows, bit 35 may
    /// compose with what precedes, bit 36 a closer look is needed.
    raw: Box<[u64]>,
    /// `Normalizer.bmp_classes`: the class of every BMP code point.
    classes: Box<[u8]>,
    /// 1 where `chr(cp).isspace()`.
    space: Box<[u8]>,
}

impl Tables {
    /// Build from the tables' little-endian bytes; None when a size is wrong.
    pub fn from_bytes(raw: &[u8], classes: &[u8], space: &[u8]) -> Option<Tables> {
        if raw.len() != 8 * BMP || classes.len() != BMP || space.len() != BMP {
            return None;
        }
        let raw: Vec<u64> = raw
            .chunks_exact(8)
            .map(|c| {
                let mut word = [0u8; 8];
                word.copy_from_slice(c);
                u64::from_le_bytes(word)
            })
            .collect();
        if classes.iter().any(|&c| c > CJK) {
            return None;
        }
        Some(Tables {
            raw: raw.into_boxed_slice(),
            classes: classes.to_vec().into_boxed_slice(),
            space: space.to_vec().into_boxed_slice(),
        })
    }

    #[inline(always)]
    fn raw(&self, cp: u32) -> u64 {
        self.raw.get(cp as usize).copied().unwrap_or(0)
    }

    /// The class of a BMP code point.
    #[inline(always)]
    pub fn class(&self, cp: u32) -> u8 {
        self.classes.get(cp as usize).copied().unwrap_or(SEPARATOR)
    }

    /// Whether a BMP code point is whitespace.
    #[inline(always)]
    pub fn space(&self, cp: u32) -> bool {
        self.space.get(cp as usize).is_some_and(|&s| s != 0)
    }
}

/// What `Normalizer.image_parts` gives for a BMP code point whose NFKC image is long: the casefold
/// images and classes of the image's code points, and whether one may compose; plus the NFKC image
/// itself (`Normalizer.nfkc_image`), spliced into the text whose NFKC is then checked.
#[derive(Debug)]
pub struct Parts {
    /// Casefold images of the NFKC image's code points.
    pub cps: Vec<u32>,
    /// Their classes.
    pub cls: Vec<u8>,
    /// Whether a code point of the image may compose with what precedes it.
    pub composing: bool,
    /// The NFKC image.
    pub image: Vec<u32>,
}

/// The outcome of the table path for one text.
#[derive(Debug, PartialEq, Eq)]
pub enum Fast {
    /// Normalised: the output holds the code points and classes.
    Done,
    /// Mapped, but a code point may compose: the output is right only if the mapped text passes
    /// `unicodedata.is_normalized("NFKC", ...)`.
    Composing,
    /// A flagged code point whose parts are not known yet.
    NeedParts,
    /// The text needs `Normalizer.normalize` (astral code points, no tables yet, an image that the
    /// table path leaves to normalize).
    NeedPython,
}

/// Process-wide Unicode data: the tables and what was learned from Python on the way.
#[derive(Default)]
pub struct UnicodeState {
    tables: OnceLock<Tables>,
    parts: RwLock<HashMap<u32, Option<Arc<Parts>>>>,
    astral: RwLock<HashMap<u32, (u8, bool)>>,
}

impl UnicodeState {
    /// The tables, if loaded.
    pub fn tables(&self) -> Option<&Tables> {
        self.tables.get()
    }

    /// Install the tables (the first call wins).
    pub fn set_tables(&self, tables: Tables) -> &Tables {
        self.tables.get_or_init(|| tables)
    }

    /// Record the parts of a flagged code point (None: the table path gives up on it).
    pub fn set_parts(&self, cp: u32, parts: Option<Parts>) {
        let mut map = self.parts.write().unwrap_or_else(PoisonError::into_inner);
        map.entry(cp).or_insert_with(|| parts.map(Arc::new));
    }

    /// Record the class and whitespace flag of an astral code point.
    pub fn set_astral(&self, cp: u32, class: u8, space: bool) {
        let mut map = self.astral.write().unwrap_or_else(PoisonError::into_inner);
        map.insert(cp, (class.min(CJK), space));
    }

    /// The class and whitespace flag of a code point, when known.
    #[inline]
    pub fn info(&self, cp: u32) -> Option<(u8, bool)> {
        if (cp as usize) < BMP {
            return self.tables().map(|t| (t.class(cp), t.space(cp)));
        }
        let map = self.astral.read().unwrap_or_else(PoisonError::into_inner);
        map.get(&cp).copied()
    }

    /// The flagged code points of a text whose parts are not known yet.
    pub fn missing_parts(&self, text: &str) -> Vec<u32> {
        let Some(tables) = self.tables() else {
            return Vec::new();
        };
        let map = self.parts.read().unwrap_or_else(PoisonError::into_inner);
        let mut out: Vec<u32> = text
            .chars()
            .map(u32::from)
            .filter(|&cp| {
                cp < BMP as u32 && (tables.raw(cp) >> 36) & 1 == 1 && !map.contains_key(&cp)
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// `Normalizer.normalize` by the tables: map a text code point by code point.
    pub fn fast(&self, text: &str, out: &mut Norm) -> Fast {
        out.clear();
        let Some(tables) = self.tables() else {
            return Fast::NeedPython;
        };
        let mut composing = false;
        let mut parts = None;
        for ch in text.chars() {
            let cp = u32::from(ch);
            if cp >= BMP as u32 {
                return Fast::NeedPython;
            }
            let entry = tables.raw(cp);
            let flags = (entry >> 32) as u32;
            composing |= flags & 8 != 0;
            if flags & 16 == 0 {
                out.cps.push(((entry >> 16) & 0xFFFF) as u32);
                out.cls.push((flags & 3) as u8);
                continue;
            }
            let map = parts
                .get_or_insert_with(|| self.parts.read().unwrap_or_else(PoisonError::into_inner));
            match map.get(&cp) {
                None => return Fast::NeedParts,
                Some(None) => return Fast::NeedPython,
                Some(Some(found)) => {
                    out.cps.extend_from_slice(&found.cps);
                    out.cls.extend_from_slice(&found.cls);
                    composing |= found.composing;
                }
            }
        }
        if composing {
            Fast::Composing
        } else {
            Fast::Done
        }
    }

    /// Tokenise a text in one pass over the table, when it needs nothing but the table: no code point
    /// outside the BMP, none that may compose, and parts known for those with long images. Returns
    /// false otherwise, as soon as it meets one; the tokens given to `sink` until then must be
    /// discarded.
    ///
    /// The tokens are those of `Tokenizer` over the normalised code points; a word whose code points
    /// all normalise to themselves is passed as a slice of the text, without a copy.
    pub fn fast_tokens(&self, text: &str, buf: &mut Vec<u8>, mut sink: impl FnMut(&[u8])) -> bool {
        let Some(tables) = self.tables() else {
            return false;
        };
        let bytes = text.as_bytes();
        let mut words = Words {
            in_word: false,
            after_letter: false,
            copying: false,
            start: 0,
        };
        let mut parts = None;
        let mut i = 0;
        while let Some(&b0) = bytes.get(i) {
            if b0 < 0x80 {
                let rest = bytes.get(i..).unwrap_or_default();
                let len = ascii_prefix(rest);
                if len >= 16 {
                    words.ascii(bytes, i, i + len, buf, &mut sink);
                    i += len;
                    continue;
                }
                let lower = b0.to_ascii_lowercase();
                let class = if lower.is_ascii_alphanumeric() {
                    LETTER
                } else {
                    SEPARATOR
                };
                words.step(
                    bytes,
                    i,
                    u32::from(lower),
                    class,
                    lower == b0,
                    buf,
                    &mut sink,
                );
                i += 1;
                continue;
            }
            let b1 = u32::from(bytes.get(i + 1).copied().unwrap_or(0) & 0x3F);
            let (cp, next) = if b0 < 0xE0 {
                ((u32::from(b0 & 0x1F) << 6) | b1, i + 2)
            } else if b0 < 0xF0 {
                let b2 = u32::from(bytes.get(i + 2).copied().unwrap_or(0) & 0x3F);
                ((u32::from(b0 & 0x0F) << 12) | (b1 << 6) | b2, i + 3)
            } else {
                return false;
            };
            let entry = tables.raw(cp);
            let flags = (entry >> 32) as u32;
            if flags & 8 != 0 {
                return false;
            }
            if flags & 16 == 0 {
                let norm = ((entry >> 16) & 0xFFFF) as u32;
                words.step(
                    bytes,
                    i,
                    norm,
                    (flags & 3) as u8,
                    norm == cp,
                    buf,
                    &mut sink,
                );
            } else {
                let map = parts.get_or_insert_with(|| {
                    self.parts.read().unwrap_or_else(PoisonError::into_inner)
                });
                let Some(Some(found)) = map.get(&cp) else {
                    return false;
                };
                if found.composing {
                    return false;
                }
                for (&norm, &class) in found.cps.iter().zip(&found.cls) {
                    words.step(bytes, i, norm, class, false, buf, &mut sink);
                }
            }
            i = next;
        }
        words.finish(bytes, buf, &mut sink);
        true
    }

    /// The text mapped to NFKC images code point by code point (what the boundary checks with
    /// `Normalizer.is_nfkc`); None when a part is unknown.
    pub fn mapped_text(&self, text: &str) -> Option<String> {
        let tables = self.tables()?;
        let map = self.parts.read().unwrap_or_else(PoisonError::into_inner);
        let mut out = String::with_capacity(text.len() + 8);
        for ch in text.chars() {
            let cp = u32::from(ch);
            let entry = tables.raw(cp);
            if (entry >> 36) & 1 == 1 {
                let parts = map.get(&cp)?.as_ref()?;
                for &image in &parts.image {
                    out.push(char::from_u32(image)?);
                }
            } else {
                out.push(char::from_u32((entry & 0xFFFF) as u32)?);
            }
        }
        Some(out)
    }

    /// Classify the code points of an already normalised text; Err with the astral code points whose
    /// class is not known yet.
    pub fn classify(&self, norm: &str, out: &mut Norm) -> Result<(), Vec<u32>> {
        out.clear();
        let Some(tables) = self.tables() else {
            return Err(Vec::new());
        };
        let mut missing = Vec::new();
        let astral = self.astral.read().unwrap_or_else(PoisonError::into_inner);
        for ch in norm.chars() {
            let cp = u32::from(ch);
            let class = if (cp as usize) < BMP {
                tables.class(cp)
            } else {
                match astral.get(&cp) {
                    Some(&(class, _)) => class,
                    None => {
                        missing.push(cp);
                        SEPARATOR
                    }
                }
            };
            out.cps.push(cp);
            out.cls.push(class);
        }
        if missing.is_empty() {
            Ok(())
        } else {
            missing.sort_unstable();
            missing.dedup();
            Err(missing)
        }
    }
}

/// `Tokenizer` over a text's bytes, keeping words that normalise to themselves as slices of the text.
struct Words {
    in_word: bool,
    after_letter: bool,
    copying: bool,
    start: usize,
}

impl Words {
    /// Take one normalised code point, of the character at byte `at` of the text.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn step(
        &mut self,
        bytes: &[u8],
        at: usize,
        norm: u32,
        class: u8,
        identity: bool,
        buf: &mut Vec<u8>,
        sink: &mut impl FnMut(&[u8]),
    ) {
        if class == LETTER || (class == MARK && self.after_letter) {
            if !self.in_word {
                self.in_word = true;
                self.copying = false;
                self.start = at;
            }
            if self.copying {
                push_utf8(buf, norm);
            } else if !identity {
                self.copying = true;
                buf.clear();
                buf.extend_from_slice(bytes.get(self.start..at).unwrap_or_default());
                push_utf8(buf, norm);
            }
            self.after_letter |= class == LETTER;
        } else if class != MARK {
            if self.in_word {
                sink(if self.copying {
                    buf.as_slice()
                } else {
                    bytes.get(self.start..at).unwrap_or_default()
                });
                self.in_word = false;
            }
            self.after_letter = false;
            if class == CJK {
                let (single, len) = utf8_array(norm);
                sink(single.get(..len).unwrap_or_default());
            }
        }
    }

    /// Take the ASCII bytes `from..to` of the text.
    fn ascii(
        &mut self,
        bytes: &[u8],
        from: usize,
        to: usize,
        buf: &mut Vec<u8>,
        sink: &mut impl FnMut(&[u8]),
    ) {
        let segment = bytes.get(from..to).unwrap_or_default();
        if self.in_word && !segment.first().is_some_and(u8::is_ascii_alphanumeric) {
            self.end(bytes, from, buf, sink);
        }
        self.after_letter &= self.in_word;
        ascii_runs(segment, |s, e, upper| {
            let (s, e) = (from + s, from + e);
            let run = bytes.get(s..e).unwrap_or_default();
            if self.in_word {
                if self.copying {
                    buf.extend(run.iter().map(u8::to_ascii_lowercase));
                } else if upper {
                    self.copying = true;
                    buf.clear();
                    buf.extend_from_slice(bytes.get(self.start..s).unwrap_or_default());
                    buf.extend(run.iter().map(u8::to_ascii_lowercase));
                }
            } else {
                self.in_word = true;
                self.start = s;
                self.copying = upper;
                if upper {
                    buf.clear();
                    buf.extend(run.iter().map(u8::to_ascii_lowercase));
                }
            }
            self.after_letter = true;
            if e < to {
                self.end(bytes, e, buf, sink);
            }
        });
    }

    /// Emit the word being built, which ends before byte `at`; a separator follows.
    #[inline(always)]
    fn end(&mut self, bytes: &[u8], at: usize, buf: &mut Vec<u8>, sink: &mut impl FnMut(&[u8])) {
        if self.in_word {
            sink(if self.copying {
                buf.as_slice()
            } else {
                bytes.get(self.start..at).unwrap_or_default()
            });
            self.in_word = false;
        }
        self.after_letter = false;
    }

    /// End of text: emit the word being built.
    fn finish(&mut self, bytes: &[u8], buf: &mut Vec<u8>, sink: &mut impl FnMut(&[u8])) {
        if self.in_word {
            sink(if self.copying {
                buf.as_slice()
            } else {
                bytes.get(self.start..).unwrap_or_default()
            });
            self.in_word = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    #[test]
    fn tables_of_the_wrong_size_are_refused() {
        let (raw, classes, space) = testing::table_bytes();
        assert!(Tables::from_bytes(&raw, &classes, &space).is_some());
        assert!(Tables::from_bytes(&raw[8..], &classes, &space).is_none());
        assert!(Tables::from_bytes(&raw, &classes[1..], &space).is_none());
        let mut bad = classes.clone();
        bad[0x41] = CJK + 1;
        assert!(Tables::from_bytes(&raw, &bad, &space).is_none());
    }

    #[test]
    fn the_fast_path_maps_folds_and_classifies() {
        let state = testing::state();
        let mut out = Norm::default();
        assert_eq!(state.fast("A\u{c9} \u{4e2d}", &mut out), Fast::Done);
        assert_eq!(out.cps, [0x61, 0xE9, 0x20, 0x4E2D]);
        assert_eq!(out.cls, [LETTER, LETTER, SEPARATOR, CJK]);
        assert_eq!(state.fast("e\u{301}", &mut out), Fast::Composing);
        assert_eq!(state.mapped_text("E\u{301}").as_deref(), Some("E\u{301}"));
        assert_eq!(state.fast("\u{1F600}", &mut out), Fast::NeedPython);
        assert_eq!(
            UnicodeState::default().fast("a", &mut out),
            Fast::NeedPython
        );
    }

    #[test]
    fn long_images_need_their_parts_once() {
        let state = testing::state();
        let mut out = Norm::default();
        assert_eq!(state.fast("x\u{fb01}", &mut out), Fast::NeedParts);
        assert_eq!(state.missing_parts("\u{fb01}x\u{fb01}"), [0xFB01]);
        assert_eq!(state.mapped_text("\u{fb01}"), None);
        state.set_parts(
            0xFB01,
            Some(Parts {
                cps: vec![0x66, 0x69],
                cls: vec![LETTER, LETTER],
                composing: false,
                image: vec![0x66, 0x69],
            }),
        );
        assert!(state.missing_parts("\u{fb01}").is_empty());
        assert_eq!(state.fast("x\u{fb01}", &mut out), Fast::Done);
        assert_eq!(out.cps, [0x78, 0x66, 0x69]);
        assert_eq!(state.mapped_text("\u{fb01}").as_deref(), Some("fi"));
        let mut tokens = Vec::new();
        assert!(state.fast_tokens("\u{fb01}ne", &mut Vec::new(), |t| tokens.push(t.to_vec())));
        assert_eq!(tokens, [b"fine".to_vec()]);
    }

    #[test]
    fn astral_classes_are_learned_and_classified() {
        let state = testing::state();
        let mut out = Norm::default();
        assert_eq!(state.info(0x1F600), None);
        assert_eq!(state.classify("a\u{1F600}", &mut out), Err(vec![0x1F600]));
        state.set_astral(0x1F600, SEPARATOR, false);
        assert_eq!(state.info(0x1F600), Some((SEPARATOR, false)));
        assert_eq!(state.classify("a\u{1F600}", &mut out), Ok(()));
        assert_eq!(out.cls, [LETTER, SEPARATOR]);
        assert_eq!(state.info(0x3000), Some((SEPARATOR, true)));
        assert!(ascii_space(0x1F) && !ascii_space(b'a'));
    }
}
