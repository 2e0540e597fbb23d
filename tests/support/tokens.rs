//! The tests' API tokens (one per role, two groups) and the tokens file that holds them.

use std::path::{Path, PathBuf};

use gce_backend::api::auth::{Role, TokenEntry, TokenFile};

/// The tests' tokens: (token, name, role, groups).
pub(crate) const TOKENS: &[(&str, &str, Role, &[&str])] = &[
    ("gbt_admin", "admin", Role::Admin, &[]),
    ("gbt_writer_infra", "writer-infra", Role::Writer, &["infra"]),
    ("gbt_writer_web", "writer-web", Role::Writer, &["web"]),
    ("gbt_reader_infra", "reader-infra", Role::Reader, &["infra"]),
    ("gbt_reader_web", "reader-web", Role::Reader, &["web"]),
    ("gbt_metrics", "scraper", Role::Metrics, &["infra"]),
];
/// The admin's token.
pub(crate) const ADMIN: &str = "gbt_admin";
/// The scraper's token (role metrics).
pub(crate) const METRICS: &str = "gbt_metrics";
/// A writer of group infra.
pub(crate) const WRITER: &str = "gbt_writer_infra";
/// A reader of group infra.
pub(crate) const READER: &str = "gbt_reader_infra";

/// The tokens file entry of `token`.
pub(crate) fn entry(token: &str, name: &str, role: Role, groups: &[&str]) -> TokenEntry {
    TokenEntry {
        name: name.into(),
        sha256: gce_backend::api::auth::hash(token),
        role,
        groups: groups.iter().map(|g| (*g).into()).collect(),
        expires: None,
    }
}

/// The text of a tokens file of [`TOKENS`] and `more`.
pub(crate) fn tokens_text(more: Vec<TokenEntry>) -> String {
    let mut token: Vec<TokenEntry> = TOKENS.iter().map(|(t, n, r, g)| entry(t, n, *r, g)).collect();
    token.extend(more);
    toml::to_string(&TokenFile { token }).unwrap()
}

/// The text of a tokens file of [`TOKENS`] without [`READER`]'s entry (reader-infra removed), and
/// `more`.
pub(crate) fn tokens_text_without_reader(more: Vec<TokenEntry>) -> String {
    let kept = TOKENS.iter().filter(|t| t.0 != READER).map(|(t, n, r, g)| entry(t, n, *r, g));
    toml::to_string(&TokenFile { token: kept.chain(more).collect() }).unwrap()
}

/// Writes the tokens file into `dir`; returns its path.
pub(crate) fn write_tokens(dir: &Path) -> PathBuf {
    let path = dir.join("tokens.toml");
    std::fs::write(&path, tokens_text(Vec::new())).unwrap();
    path
}
