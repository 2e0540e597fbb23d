//! Which tokens the API accepts: the `--tokens` file (made on a first start with
//! `--tokens-init`) or `GCE_BACKEND_TOKENS`, or, in the embedded default (no Redis, no tokens
//! given), one fresh admin token for this run.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::options::RunOptions;
use crate::error::Usage;

/// Where `--tokens-init` writes the first admin token: beside the tokens file.
pub fn admin_token_path(tokens: &Path) -> PathBuf {
    let mut name = tokens.file_name().unwrap_or_default().to_os_string();
    name.push(".admin-token");
    tokens.with_file_name(name)
}

/// `--tokens-init`: makes the tokens file `path` when it does not exist (never touching one that
/// does), with one admin token, and writes the token itself to [`admin_token_path`]; both
/// owner-only, each made whole or not at all.
fn init(path: &Path) -> anyhow::Result<()> {
    use crate::api::auth::{Role, TokenFile, new_token};
    if path.exists() {
        return Ok(());
    }
    let (token, entry) = new_token("first-admin", Role::Admin, Vec::new());
    let text = format!(
        "# Made on the first start (--tokens-init): one admin token, shown once in {}.\n\
         # Add tokens with `gce-backend token --name NAME --role ROLE`; this file is read again on a change.\n{}",
        admin_token_path(path).display(),
        toml::to_string(&TokenFile { token: vec![entry] })?
    );
    let write = |to: &Path, text: &str| -> std::io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let tmp = to.with_extension("partial");
        let mut f =
            std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, to)
    };
    let made = |e: std::io::Error| Usage(format!("--tokens-init: cannot make {}: {e}", path.display()));
    // The token first: a tokens file without its token beside it would lock the operator out.
    write(&admin_token_path(path), &format!("{token}\n")).map_err(made)?;
    write(path, &text).map_err(made)?;
    tracing::warn!(
        tokens = %path.display(),
        token_file = %admin_token_path(path).display(),
        "first start: made the tokens file with one admin token; read the token from token_file, keep it, then delete that file"
    );
    Ok(())
}

/// The API's tokens: from `--tokens`, or a fresh admin token in the embedded default (returned
/// too, to be shown).
pub fn tokens(opts: &RunOptions) -> anyhow::Result<(crate::api::auth::Tokens, Option<String>)> {
    use crate::api::auth::{Caller, Role as ApiRole, Tokens, new_token};
    if let (Some(path), true) = (&opts.api.tokens, opts.api.tokens_init) {
        init(path)?;
    }
    let given = match (&opts.api.tokens, &opts.api.tokens_toml) {
        (Some(path), _) if path.is_dir() => {
            return Err(Usage(format!(
                "--tokens {}: a directory, not a tokens file (a container runtime makes one for a bind mount whose file is missing: make the file with `gce-backend token`, or start with --tokens-init on a path of its own)",
                path.display()
            ))
            .into());
        }
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

#[cfg(test)]
mod tests;
