//! The binary's one error of its own: a mistake in the command line or its inputs (exit code 2),
//! as opposed to a failure (exit code 1). Every other error is the layer's own (`anyhow` carries
//! them to `main`).

/// A mistake in the command line (exit code 2), as opposed to a failure (exit code 1).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Usage(pub String);
