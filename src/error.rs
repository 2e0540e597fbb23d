//! The binary's one error of its own: a mistake in the command line or its inputs (exit code 2),
//! as opposed to a failure (exit code 1). Every other error is the layer's own (`anyhow` carries
//! them to `main`); [`causes`] says one with everything under it.

/// A mistake in the command line (exit code 2), as opposed to a failure (exit code 1).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Usage(pub String);

/// An error with every cause under it (`error sending request …: tcp connect error: Connection
/// refused`): the top line alone does not say whether the API is down, the name unknown or the
/// certificate wrong. A cause already in the line above is not repeated.
pub fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = cause.source();
    }
    out
}
