//! `register`: a VM registers with its identity proof. No token: the proof is the credential,
//! and every refusal, a body that does not parse included, is the same 403. Its reason goes to
//! our log only: at WARN once the proof's signature held (a real instance of ours was refused),
//! at DEBUG before (anyone may send garbage); summarised by reason (the first at once, then one
//! line a minute with the count), so a flood of refusals cannot flood the log. Calls are limited
//! per client address (`[http] register_per_address`, in `listen.rs`).

use axum::body::Bytes;
use axum::extract::State;
use gce_backend_jobs::identity::Refused;
use gce_backend_jobs::operate::register::{RegisterInput, Registration, register as registered};
use tracing::Level;

use super::error::ApiError;
use super::io::{Out, ok};
use super::state::Api;

/// The one answer to a proof that does not hold, whatever was wrong with it.
pub const REFUSED: &str = "registration refused";

/// `register`: the audience a proof must name is this API's root URL.
pub(super) async fn register(State(api): State<Api>, body: Bytes) -> Out<Registration> {
    let input: Result<RegisterInput, _> = serde_json::from_slice(&body);
    let outcome = match input {
        Ok(input) => registered(&api.ctx, &input, api.urls.root()).await,
        Err(_) => Err(Refused("body does not parse")),
    };
    match outcome {
        Ok(r) => ok(r),
        Err(why) => {
            let level = if why.after_signature() { Level::WARN } else { Level::DEBUG };
            api.refusals.note(why.0, level, String::new);
            Err(ApiError::forbidden(REFUSED))
        }
    }
}
