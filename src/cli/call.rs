//! What every operator command over the API shares: where the API is ([`Target`]), a client
//! for it, one call and every page of a paged method, a Config read from a file as the importer
//! reads it, a confirmation asked on the terminal, and printing as a table or JSON.

use std::collections::BTreeMap;

use serde_json::Value;

use super::client::{CallError, Client};
use crate::api::types::Page;
use crate::error::Usage;
use crate::out;

/// Where the API is and how to print.
#[derive(Debug, Clone, clap::Args)]
pub struct Target {
    /// The deployment's root URL (the API is under ROOT/api/gce-backend/v1); no default.
    #[arg(long, env = "GCE_BACKEND_ROOT_URL", global = true)]
    pub root_url: Option<String>,
    /// Print the API's JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
}

/// A Config from standard input (`-f -`), parsed as a file's and as bounded; `from_file`
/// metadata is refused there (standard input has no directory to read it from).
pub(super) fn config_stdin() -> anyhow::Result<Value> {
    use gce_backend_jobs::config::Config;
    let (origin, text) = super::convert::read(std::path::Path::new("-"))?;
    let c = Config::parse(&text, &origin).map_err(|e| usage(e.to_string()))?;
    if c.attributes.metadata.iter().any(|m| m.from_file.is_some()) {
        return Err(usage(format!(
            "{origin}: from_file metadata needs a file (-f FILE): standard input has no directory to read it from"
        )));
    }
    Ok(serde_json::to_value(c)?)
}

pub(super) fn usage(msg: impl Into<String>) -> anyhow::Error {
    Usage(msg.into()).into()
}

pub(super) fn client(t: &Target) -> anyhow::Result<Client> {
    crate::adapters::install_crypto();
    let root = t.root_url.as_deref().filter(|r| !r.is_empty()).ok_or_else(|| {
        usage("no root URL: pass --root-url or set GCE_BACKEND_ROOT_URL (`gce-backend run` prints it)")
    })?;
    let token = std::env::var("GCE_BACKEND_TOKEN").ok().filter(|t| !t.is_empty());
    Client::new(root, token).map_err(fail)
}

pub(super) fn fail(e: CallError) -> anyhow::Error {
    match e {
        CallError::Usage(m) => usage(m),
        other => anyhow::anyhow!(other),
    }
}

fn args(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

pub(super) async fn call(
    c: &mut Client,
    name: &str,
    a: &[(&str, &str)],
    input: Option<Value>,
) -> anyhow::Result<Value> {
    c.call(name, &args(a), input.as_ref()).await.map_err(fail)
}

/// Every item (`field`) of a paged method, following its continuation tokens (pages of the
/// largest size the API gives, [`Page::LIMIT_MAX`]).
pub(super) async fn every_page(
    c: &mut Client,
    name: &str,
    fixed: &[(&str, &str)],
    field: &str,
) -> anyhow::Result<Vec<Value>> {
    Ok(pages(c, name, fixed, field).await?.0)
}

/// [`every_page`], and the last page's answer (for what every page carries alike).
pub(super) async fn pages(
    c: &mut Client,
    name: &str,
    fixed: &[(&str, &str)],
    field: &str,
) -> anyhow::Result<(Vec<Value>, Value)> {
    let (mut all, mut token) = (Vec::new(), None::<String>);
    let limit = Page::LIMIT_MAX.to_string();
    loop {
        let mut a = fixed.to_vec();
        a.push(("limit", &limit));
        if let Some(tok) = &token {
            a.push(("continuationToken", tok));
        }
        let page = call(c, name, &a, None).await?;
        all.extend(page[field].as_array().cloned().unwrap_or_default());
        token = page["continuationToken"].as_str().map(str::to_owned);
        if token.is_none() {
            return Ok((all, page));
        }
    }
}

/// Reads a Config file as the importer does (`from_file` metadata resolved, from the file's
/// directory only); `-` is standard input ([`config_stdin`]).
pub(super) fn config_file(path: &std::path::Path) -> anyhow::Result<Value> {
    if path == std::path::Path::new("-") {
        return config_stdin();
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    let (config, _) =
        gce_backend_jobs::cron::import_configs::load(path, dir).map_err(|e| usage(e.to_string()))?;
    Ok(serde_json::to_value(config)?)
}

/// One queue's counts, from `listQueues`; a usage error naming the queues when there is none
/// of that name.
pub(super) async fn queue_counts(c: &mut Client, queue: &str) -> anyhow::Result<Value> {
    let all = call(c, "listQueues", &[], None).await?;
    let queues = all["queues"].as_array().cloned().unwrap_or_default();
    match queues.iter().find(|q| q["name"] == queue) {
        Some(one) => Ok(one["counts"].clone()),
        None => {
            let names: Vec<&str> = queues.iter().filter_map(|q| q["name"].as_str()).collect();
            Err(usage(format!("no queue {queue:?} (queues: {})", names.join(", "))))
        }
    }
}

/// The first page (up to [`Page::LIMIT_MAX`]) of a queue's tasks by `method`: enough to say
/// whose they are.
pub(super) async fn first_page(c: &mut Client, method: &str, queue: &str) -> anyhow::Result<Vec<Value>> {
    let limit = Page::LIMIT_MAX.to_string();
    let page = call(c, method, &[("queue", queue), ("limit", &limit)], None).await?;
    Ok(page["tasks"].as_array().cloned().unwrap_or_default())
}

/// Asks `question` on the terminal unless `yes`; refuses without a terminal to ask on.
pub(super) fn confirm(question: &str, yes: bool) -> anyhow::Result<()> {
    use std::io::{BufRead, IsTerminal, Write};
    if yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        return Err(usage(format!(
            "{question} Add --yes to confirm (standard input is no terminal to ask on)"
        )));
    }
    eprint!("{question} [y/N] ");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    if matches!(answer.trim(), "y" | "Y" | "yes") {
        Ok(())
    } else {
        Err(usage("not confirmed: nothing was dropped"))
    }
}

/// JSON input (YAML is read by `configs apply`).
pub(super) fn json_input(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))
}

pub(super) fn show(t: &Target, v: &Value, table: impl Fn(&Value) -> String) -> anyhow::Result<()> {
    if t.json {
        out::json(v);
    } else {
        out::line(table(v).trim_end());
    }
    Ok(())
}
