//! The three ways a call can fail, as the protocol names them (`ERROR <kind> <message>`).

use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// Bad input the engine refuses (NaN / +inf logits, out-of-range parameters, bad shapes).
    Refused(String),
    /// A case this engine does not implement (an option it lacks): NOT COVERED.
    Unsupported(String),
    /// Anything else the engine reports about itself.
    Failed(String),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Refused(_) => "refused",
            Error::Unsupported(_) => "unsupported",
            Error::Failed(_) => "failed",
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Error::Refused(m) | Error::Unsupported(m) | Error::Failed(m) => m,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind(), self.message())
    }
}

/// `return Err(Error::Refused(format!(...)))`.
macro_rules! refuse {
    ($($arg:tt)*) => {
        return Err($crate::error::Error::Refused(format!($($arg)*)))
    };
}

pub(crate) use refuse;
