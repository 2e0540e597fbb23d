//! Which tokens the API accepts: the `--tokens` file or `GCE_BACKEND_TOKENS`, or, in the
//! embedded default (no Redis, no tokens given), one fresh admin token for this run.

use super::options::RunOptions;
use crate::error::Usage;

/// The API's tokens: from `--tokens`, or a fresh admin token in the embedded default (returned
/// too, to be shown).
pub fn tokens(opts: &RunOptions) -> anyhow::Result<(crate::api::auth::Tokens, Option<String>)> {
    use crate::api::auth::{Caller, Role as ApiRole, Tokens, new_token};
    let given = match (&opts.api.tokens, &opts.api.tokens_toml) {
        (Some(path), _) => Some((
            std::fs::read_to_string(path).map_err(|e| Usage(format!("--tokens {}: {e}", path.display())))?,
            path.display().to_string(),
        )),
        (None, Some(text)) => Some((text.clone(), "GCE_BACKEND_TOKENS".to_owned())),
        (None, None) => None,
    };
    match given {
        Some((text, origin)) => {
            let tokens = Tokens::parse(&text, &origin).map_err(Usage)?;
            if tokens.is_empty() && opts.role.api() {
                tracing::warn!(tokens = %origin, "no API token: every API call will answer 401");
            }
            Ok((tokens, None))
        }
        None if opts.store.redis.is_none() && opts.role.api() => {
            let (token, entry) = new_token("demo-admin", ApiRole::Admin, Vec::new());
            let caller = Caller { name: entry.name, role: ApiRole::Admin, groups: Vec::new() };
            Ok((Tokens::single(&token, caller), Some(token)))
        }
        None => {
            if opts.role.api() {
                tracing::warn!(
                    "no --tokens file: every API call will answer 401 (make them with `gce-backend token --name NAME --role ROLE`)"
                );
            }
            Ok((Tokens::default(), None))
        }
    }
}
