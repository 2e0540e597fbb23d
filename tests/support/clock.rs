//! The tests' one read of the wall clock, for records written straight into a store that a
//! running service (or the store itself) compares with real time; everything else reads time
//! from a context's Clock (`ctx.now()`).

use chrono::{DateTime, Utc};

/// Now, by the wall clock.
// The tests' wall clock: the records it stamps are read against the real time of a store or a
// service process, which no test clock reaches.
#[allow(clippy::disallowed_methods)]
pub(crate) fn wall_now() -> DateTime<Utc> {
    Utc::now()
}
