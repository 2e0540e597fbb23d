//! Health checks of any listener: `/healthz` (the process serves) and `/readyz` (the datastore
//! answers).

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use gce_backend_jobs::Ctx;
use serde::Serialize;

use super::error::ApiError;
use super::io::{Out, ok};
use super::state::Api;

/// What `/readyz` answers.
#[derive(Serialize)]
pub struct Ready {
    ready: bool,
    store: String,
}

/// 200 while the process serves.
pub async fn healthz() -> Json<serde_json::Value> {
    Json(serde_json::json!({"alive": true}))
}

/// 200 when the datastore answers, 503 otherwise.
pub(super) async fn readyz(State(api): State<Api>) -> Out<Ready> {
    ready(&api.ctx).await
}

/// `/readyz` of any listener: 200 when the datastore answers within 5 s, 503 otherwise.
pub async fn ready(ctx: &Ctx) -> Out<Ready> {
    let probe =
        tokio::time::timeout(Duration::from_secs(5), gce_backend_jobs::operate::paused_all(ctx)).await;
    match probe {
        Ok(Ok(_)) => ok(Ready { ready: true, store: "ok".into() }),
        Ok(Err(e)) => Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, format!("datastore: {e}"))),
        Err(_) => Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "datastore: no answer within 5s")),
    }
}
