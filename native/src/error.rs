//! The one error type of the compute modules: what was wrong with an argument, in words.
//!
//! The Python boundary (`crate::python`) raises `Value` as the adapter's InvalidArgument (ValueError
//! before the adapter sets the types); the messages are the pure engine's, which the tests compare.
//! Wrong types are the boundary's own business: compute code only ever sees typed values.

use std::fmt;

/// A refused argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A value out of range or of the wrong shape.
    Value(String),
}

impl fmt::Display for Error {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Value(message) => out.write_str(message),
        }
    }
}

impl std::error::Error for Error {}

/// A bad-value error with a message.
pub fn value(message: impl Into<String>) -> Error {
    Error::Value(message.into())
}
