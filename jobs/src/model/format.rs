//! Record formats: which build may act on a stored Config or VM record.
//!
//! Fields a newer build adds are kept by every build ([`crate::unknown`]); a record that asks for
//! more — a rule an older build would apply by half — carries a higher format, the lowest that
//! reads it right. A build meets a format above [`FORMAT`] and leaves the record to the build
//! that wrote it (said once on the Config's status), rather than act on half of it or take it
//! for corrupt. Only bytes that are not a record at all are corrupt.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The highest record format this build acts on.
pub const FORMAT: u32 = 1;

/// A record's format: [`FORMAT`] for a new record, 1 for one written before formats were kept.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct Format(pub u32);

impl Default for Format {
    fn default() -> Self {
        Format(FORMAT)
    }
}

impl Format {
    /// True when this build reads the record right (its format is [`FORMAT`] or older).
    pub fn readable(self) -> bool {
        self.0 <= FORMAT
    }
}

/// A stored record with a format.
pub trait Formatted {
    /// Its format.
    fn format(&self) -> Format;
}

/// Why stored text is not a record this build acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Undecoded {
    /// A newer build's record (its format): left to it.
    Newer(u32),
    /// Not a record: what is wrong.
    Corrupt(String),
}

/// Reads a stored record: a record of a newer format is [`Undecoded::Newer`] whether or not it
/// decodes here; text that does not decode and claims no newer format is corrupt.
pub fn decode<T: DeserializeOwned + Formatted>(raw: &str) -> Result<T, Undecoded> {
    match serde_json::from_str::<T>(raw) {
        Ok(v) if v.format().readable() => Ok(v),
        Ok(v) => Err(Undecoded::Newer(v.format().0)),
        Err(e) => {
            #[derive(Deserialize)]
            struct Head {
                format: u32,
            }
            match serde_json::from_str::<Head>(raw) {
                Ok(Head { format }) if format > FORMAT => Err(Undecoded::Newer(format)),
                _ => Err(Undecoded::Corrupt(e.to_string())),
            }
        }
    }
}

impl std::fmt::Display for Undecoded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Undecoded::Newer(n) => write!(
                f,
                "written by a newer build (record format {n}; this build acts on format {FORMAT} and older): left to it"
            ),
            Undecoded::Corrupt(e) => f.write_str(e),
        }
    }
}

#[cfg(test)]
mod tests;
