//! A small Unicode table for the unit tests, true to Python's data for the code points it covers:
//! ASCII, Latin-1 letters (upper case folding to lower), the CJK ideographs U+4E00-9FFF, white space,
//! a combining acute accent (may compose) and U+FB01 (a long NFKC image: "fi").

use crate::unicode::{Tables, UnicodeState, BMP, CJK, LETTER, MARK, SEPARATOR};

const SPACES: [u32; 8] = [0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000];

fn class_of(cp: u32) -> u8 {
    match cp {
        0x30..=0x39 | 0x41..=0x5A | 0x61..=0x7A => LETTER,
        0xC0..=0xFF if cp != 0xD7 && cp != 0xF7 => LETTER,
        0x0301 => MARK,
        0x4E00..=0x9FFF => CJK,
        _ => SEPARATOR,
    }
}

fn is_space(cp: u32) -> bool {
    matches!(cp, 0x09..=0x0D | 0x1C..=0x20 | 0x2000..=0x200A) || SPACES.contains(&cp)
}

fn fold(cp: u32) -> u32 {
    match cp {
        0x41..=0x5A => cp + 0x20,
        0xC0..=0xDE if cp != 0xD7 => cp + 0x20,
        _ => cp,
    }
}

/// The tables' bytes: (raw, classes, space), as `Tables::from_bytes` takes them.
pub fn table_bytes() -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let mut raw = Vec::with_capacity(8 * BMP);
    let mut classes = Vec::with_capacity(BMP);
    let mut space = Vec::with_capacity(BMP);
    for cp in 0..BMP as u32 {
        let folded = fold(cp);
        let mut entry =
            u64::from(cp) | (u64::from(folded) << 16) | (u64::from(class_of(folded)) << 32);
        if cp == 0x0301 {
            entry |= 1 << 35;
        }
        if cp == 0xFB01 {
            entry |= 1 << 36;
        }
        raw.extend_from_slice(&entry.to_le_bytes());
        classes.push(class_of(cp));
        space.push(u8::from(is_space(cp)));
    }
    (raw, classes, space)
}

/// A process state with the small table loaded.
pub fn state() -> UnicodeState {
    let state = UnicodeState::default();
    let (raw, classes, space) = table_bytes();
    let tables = Tables::from_bytes(&raw, &classes, &space).expect("tables of the right size");
    state.set_tables(tables);
    state
}

/// The band MinHash of verified mode's tests: 32 values of 8 bits, odd multipliers from `mix`.
pub fn band_minhash(n: usize, seed: u64) -> crate::minhash::Sketcher {
    let words = |salt: u64| -> Vec<u8> {
        (0..32u64)
            .flat_map(|i| (crate::hash::mix(i ^ salt) | 1).to_le_bytes())
            .collect()
    };
    crate::minhash::Sketcher::new(32, 8, n, seed, &words(1), &words(2)).unwrap()
}
