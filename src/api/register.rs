//! `register`: a VM registers with its identity proof. No token: the proof is the credential,
//! and every refusal is the same 403 (its reason goes to our log only, at WARN).

use axum::extract::State;
use gce_backend_jobs::operate::register::{RegisterInput, Registration, register as registered};

use super::error::ApiError;
use super::{Api, Input, Out, ok};

/// The one answer to a proof that does not hold, whatever was wrong with it.
pub const REFUSED: &str = "registration refused";

/// `register`: the audience a proof must name is this API's root URL.
pub(super) async fn register(
    State(api): State<Api>,
    Input(input): Input<RegisterInput>,
) -> Out<Registration> {
    match registered(&api.ctx, &input, api.urls.root()).await {
        Ok(r) => ok(r),
        Err(why) => {
            tracing::warn!(reason = why.0, "registration refused");
            Err(ApiError::forbidden(REFUSED))
        }
    }
}
