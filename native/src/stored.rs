//! What a verified index stores of a text: its fingerprint (`engine::fingerprint`) and its stored
//! sketch (`OddSketcher::banded_stored`), made in one pass where they share their tokens.
//!
//! The sketches' tokens are the fingerprint's, without stopwords or chunks: where the scheme has no
//! stopwords, the text is one chunk, the features are tokens and the token hashes of one lane with
//! the sketches' seed (`engine::shares_tokens`; the default scheme and sketcher), the text is
//! normalised, tokenised and hashed once for both. Elsewhere each is made as on its own.

use std::borrow::Cow;

use crate::engine::{self, Config, Job, Normalizer};
use crate::minhash::{distinct_shingles, token_ids, MinJob, Sketcher};
use crate::odd_sketch::OddSketcher;

/// A text's fingerprint under `cfg` (`chunk`: as `engine::fingerprint`'s) and its stored sketch of
/// `odd` with the band MinHash `bands` (`odd.banded_check` it first); `normalizer` normalises for
/// both (the engine and the sketcher must share their Unicode rules).
pub fn fingerprint_and_stored<N: Normalizer>(
    cfg: &Config,
    chunk: usize,
    odd: &OddSketcher,
    bands: &Sketcher,
    text: &str,
    normalizer: &mut N,
) -> (u128, Vec<u8>) {
    let job = MinJob::Text(Cow::Borrowed(text));
    if engine::shares_tokens(cfg, odd.seed, text, chunk) {
        let ids = token_ids(&job, normalizer, odd.seed);
        let fp = engine::fingerprint_of_tokens(cfg, &ids);
        return (
            fp,
            odd.stored_of_shingles(bands, &distinct_shingles(&ids, odd.n)),
        );
    }
    let fp = engine::fingerprint(cfg, &Job::Text(Cow::Borrowed(text)), chunk, normalizer);
    (fp, odd.banded_stored(bands, &job, normalizer))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolver::{Answers, Resolver};
    use crate::testing;

    // One pass or two, the values of the separate calls: shared tokens (the default scheme), and
    // schemes that cannot share them (stopwords, another seed, 128 bits, "chars", "words", binary,
    // chunks).
    #[test]
    fn one_pass_gives_the_separate_values() {
        let long: String = (0..3000).map(|i| format!("w{i} ")).collect();
        let texts = [
            "",
            " ",
            "one two",
            "Caf\u{e9} \u{4e2d}\u{6587} ok hello",
            "the cat the dog the end",
            &long,
        ];
        let configs = [
            Config::new("shingles", 3, 64, false, 0, vec![]).unwrap(),
            Config::new("shingles", 2, 32, true, 0, vec![]).unwrap(),
            Config::new("words", 1, 64, false, 0, vec![]).unwrap(),
            Config::new("shingles", 3, 64, false, 0, vec![String::from("the")]).unwrap(),
            Config::new("shingles", 3, 64, false, 9, vec![]).unwrap(),
            Config::new("shingles", 3, 128, false, 0, vec![]).unwrap(),
            Config::new("chars", 4, 64, false, 0, vec![]).unwrap(),
        ];
        let odd = OddSketcher::new(3, 0).unwrap();
        let bands = testing::band_minhash(3, 0);
        let state = testing::state();
        let answers = Answers::default();
        for cfg in &configs {
            for text in texts {
                for chunk in [1 << 20, 7] {
                    let mut resolver = Resolver::new(&state, &answers);
                    let got = fingerprint_and_stored(cfg, chunk, &odd, &bands, text, &mut resolver);
                    let job = Job::Text(Cow::Borrowed(text));
                    let fp = engine::fingerprint(cfg, &job, chunk, &mut resolver);
                    let min_job = MinJob::Text(Cow::Borrowed(text));
                    let stored = odd.banded_stored(&bands, &min_job, &mut resolver);
                    assert!(resolver.take_needs().is_empty());
                    assert_eq!(got, (fp, stored), "{cfg:?} {text:.20} {chunk}");
                }
            }
        }
    }
}
