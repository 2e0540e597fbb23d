//! An operator's write is answered only once the replicas the deployment counts on hold it
//! (`WAIT`; the `--redis` URL's `replicas=N`): a primary that dies just after a 2xx loses
//! nothing the operator was told is done. Where they do not acknowledge in time the answer is
//! 503 (the change may be lost; the same call is safe to repeat), never a 2xx that pretends.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use gce_backend_jobs::ports::store::Store;

use super::error::ApiError;

/// Runs the method, then waits for the replicas when it succeeded.
pub(super) async fn replicated(State(store): State<Arc<dyn Store>>, req: Request, next: Next) -> Response {
    let answer = next.run(req).await;
    if !answer.status().is_success() {
        return answer;
    }
    match store.replicated().await {
        Ok(()) => answer,
        Err(e) => {
            tracing::warn!(error = %e, "an operator's write was not acknowledged by the replicas; answering 503");
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "the change was made on the primary but not yet on its replicas ({e}): it may be \
                     lost if the primary fails now; make the same call again"
                ),
            )
            .into_response()
        }
    }
}
