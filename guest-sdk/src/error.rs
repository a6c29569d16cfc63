//! The error a reconcile returns.

use std::fmt;

/// A failed reconcile: the host logs the message and retries the key with
/// exponential backoff. Any error converts into it with `?`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    message: String,
}

impl Error {
    /// An error with this message.
    pub fn msg(message: impl fmt::Display) -> Self {
        Self {
            message: message.to_string(),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl<E: std::error::Error> From<E> for Error {
    fn from(error: E) -> Self {
        Self::msg(error)
    }
}

/// A `Result` whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
