//! `simhash_redis_native`: the compiled core of simhash-redis, bit for bit with the pure engine.
//!
//! `python` is the Python boundary and the only module that knows Python (PyO3): argument checks and
//! conversions, errors raised as the adapter's exceptions, and the questions about Unicode that only
//! the running Python answers. Every other module is plain Rust: slices and vectors in, values or
//! `error::Error` out, never a call into Python; `lane` (the service's HTTP/1.1 loop) does socket I/O
//! and hands what it reads to a `lane::Host`, which the boundary implements.

// One unsafe block, where the service hands the lane a socket's descriptor (python/lane.rs).
#![deny(unsafe_code)]

mod candidates;
mod engine;
mod error;
mod flatjson;
mod hash;
mod lane;
mod lines;
mod minhash;
mod odd_sketch;
mod packing;
mod python;
mod resolver;
mod resp;
mod setreplies;
mod stored;
mod sums;
mod textlines;
mod tokenize;
mod unicode;

#[cfg(test)]
mod testing;
