//! The table path as the compute modules' `Normalizer`, noting what only Python can answer.
//!
//! Compute code never calls into Python. A document is computed against the process's Unicode tables
//! (`UnicodeState`) and the answers Python gave so far (`Answers`); whatever neither covers (tables
//! not loaded yet, a text the table path leaves to `unicodedata`, an astral code point of unknown
//! class) is noted in `Needs` and the computation goes on with an empty stand-in, so that one pass
//! notes everything a document needs. The result of such a pass is discarded: the Python boundary
//! (`crate::python`) asks Python for what was noted, adds it to the answers, and runs the document
//! again.

use std::collections::HashMap;

use xxhash_rust::xxh3::Xxh3DefaultBuilder;

use crate::engine::Normalizer;
use crate::unicode::{Fast, Norm, UnicodeState};

/// What one computation needed and did not find.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// The Unicode tables are not loaded yet.
    pub tables: bool,
    /// Texts to normalise as Python does (`Normalizer.normalize`).
    pub texts: Vec<String>,
    /// Astral code points whose class and whitespace flag are unknown.
    pub astral: Vec<u32>,
}

impl Needs {
    /// Whether nothing was needed: the computation's result stands.
    pub fn is_empty(&self) -> bool {
        !self.tables && self.texts.is_empty() && self.astral.is_empty()
    }

    /// Add another computation's needs.
    pub fn merge(&mut self, other: Needs) {
        self.tables |= other.tables;
        self.texts.extend(other.texts);
        self.astral.extend(other.astral);
    }
}

/// Normalised texts, as Python gave them, for the texts the table path leaves to it.
#[derive(Default)]
pub struct Answers {
    // Keys are whole texts (up to a chunk): xxh3 hashes them at memory speed.
    texts: HashMap<String, Norm, Xxh3DefaultBuilder>,
}

impl Answers {
    /// Record the normalised form of a text.
    pub fn insert(&mut self, text: String, norm: Norm) {
        self.texts.insert(text, norm);
    }

    /// Whether a text has an answer.
    pub fn contains(&self, text: &str) -> bool {
        self.texts.contains_key(text)
    }

    fn get(&self, text: &str) -> Option<&Norm> {
        if self.texts.is_empty() {
            return None;
        }
        self.texts.get(text)
    }
}

/// The `Normalizer` of the compute modules: tables, then answers, else a note in `needs`.
pub struct Resolver<'a> {
    state: &'a UnicodeState,
    answers: &'a Answers,
    needs: Needs,
}

impl<'a> Resolver<'a> {
    /// A resolver over the process's Unicode data and the answers so far.
    pub fn new(state: &'a UnicodeState, answers: &'a Answers) -> Self {
        Resolver {
            state,
            answers,
            needs: Needs::default(),
        }
    }

    /// Take the needs noted so far, leaving none (between two documents of a batch).
    pub fn take_needs(&mut self) -> Needs {
        std::mem::take(&mut self.needs)
    }
}

impl Normalizer for Resolver<'_> {
    fn normalize(&mut self, text: &str, out: &mut Norm) {
        if let Some(known) = self.answers.get(text) {
            out.clone_from(known);
            return;
        }
        if self.state.tables().is_none() {
            self.needs.tables = true;
            out.clear();
            return;
        }
        if self.state.fast(text, out) != Fast::Done {
            self.needs.texts.push(text.to_owned());
            out.clear();
        }
    }

    fn is_space(&mut self, cp: u32) -> bool {
        match self.state.info(cp) {
            Some((_, space)) => space,
            None => {
                if self.state.tables().is_none() {
                    self.needs.tables = true;
                } else {
                    self.needs.astral.push(cp);
                }
                false
            }
        }
    }

    fn fast_tokens(&mut self, text: &str, buf: &mut Vec<u8>, sink: impl FnMut(&[u8])) -> bool {
        // A text with an answer fails here again where it failed before (or, once its parts are
        // known, gives the tokens of the very tables that answered it): no look-up needed.
        self.state.fast_tokens(text, buf, sink)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    fn normalize(resolver: &mut Resolver<'_>, text: &str) -> Vec<u32> {
        let mut norm = Norm::default();
        resolver.normalize(text, &mut norm);
        norm.cps
    }

    #[test]
    fn the_tables_answer_alone_where_they_can() {
        let state = testing::state();
        let answers = Answers::default();
        let mut resolver = Resolver::new(&state, &answers);
        assert_eq!(normalize(&mut resolver, "\u{c9}a"), [0xE9, 0x61]);
        assert!(resolver.is_space(0x3000));
        let mut tokens = Vec::new();
        let mut buf = Vec::new();
        assert!(
            resolver.fast_tokens("\u{c9}t\u{e9} \u{4e2d}", &mut buf, |t| tokens
                .push(t.to_vec()))
        );
        assert_eq!(tokens, ["\u{e9}t\u{e9}".as_bytes(), "\u{4e2d}".as_bytes()]);
        assert!(resolver.take_needs().is_empty());
    }

    #[test]
    fn what_the_tables_cannot_answer_is_noted() {
        let state = testing::state();
        let mut answers = Answers::default();
        let mut resolver = Resolver::new(&state, &answers);
        // Astral, composing, and a long NFKC image whose parts are unknown.
        for text in ["a\u{1F600}", "e\u{301}", "\u{fb01}"] {
            assert!(normalize(&mut resolver, text).is_empty());
        }
        assert!(!resolver.is_space(0x1F600));
        let needs = resolver.take_needs();
        assert_eq!(needs.texts, ["a\u{1F600}", "e\u{301}", "\u{fb01}"]);
        assert_eq!(needs.astral, [0x1F600]);
        assert!(!needs.tables);
        answers.insert(
            String::from("e\u{301}"),
            Norm {
                cps: vec![0xE9],
                cls: vec![crate::unicode::LETTER],
            },
        );
        let mut resolver = Resolver::new(&state, &answers);
        assert_eq!(normalize(&mut resolver, "e\u{301}"), [0xE9]);
        assert!(resolver.take_needs().is_empty());
    }

    #[test]
    fn without_tables_only_the_tables_are_needed() {
        let state = UnicodeState::default();
        let answers = Answers::default();
        let mut resolver = Resolver::new(&state, &answers);
        assert!(!resolver.fast_tokens("\u{e9}", &mut Vec::new(), |_| {}));
        assert!(normalize(&mut resolver, "\u{e9}").is_empty());
        assert!(!resolver.is_space(0xA0));
        let needs = resolver.take_needs();
        assert!(needs.tables && needs.texts.is_empty() && needs.astral.is_empty());
        let mut all = Needs::default();
        all.merge(needs);
        assert!(!all.is_empty());
    }
}
