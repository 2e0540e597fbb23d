//! The docs' examples, run as written: every ```console block of `README.md` and
//! `docs/operating.md` is run by trycmd, command by command and in order, against the embedded
//! default (`gce-backend run` over this repository's `config/pools`, its pools connected first),
//! from the repository's root. A changed column or message fails here until the docs follow.
//!
//! In an example's output `[..]` stands for any text within a line, a line `...` for any lines,
//! `[ROOT]` for the run's root URL; `? failed` after the output expects a non-zero exit.

use std::time::Duration;

use serde_json::Value;

use crate::support::{BIN, embedded_default, temp_dir};

/// How long the pools may take to connect.
const LIMIT: Duration = Duration::from_secs(60);

/// The files whose examples are run, in this order (one embedded default for all: an example
/// may rely on what an earlier one changed).
const DOCS: [&str; 2] = ["README.md", "docs/operating.md"];

#[test]
fn the_docs_examples_run_as_written() {
    let root_dir = env!("CARGO_MANIFEST_DIR");
    let pools = temp_dir();
    for f in std::fs::read_dir(format!("{root_dir}/config/pools")).unwrap() {
        let f = f.unwrap();
        std::fs::copy(f.path(), pools.join(f.file_name())).unwrap();
    }
    let (mut child, _out, root, token) = embedded_default(&pools, &[]);
    // Every pool connected, as the examples show it at rest.
    let status = || {
        let o = std::process::Command::new(BIN)
            .args(["status", "--live"])
            .env("GCE_BACKEND_ROOT_URL", &root)
            .env("GCE_BACKEND_TOKEN", &token)
            .output()
            .unwrap();
        serde_json::from_slice::<Value>(&o.stdout).unwrap_or(Value::Null)
    };
    let started = tokio::time::Instant::now();
    loop {
        let v = status();
        let configs = v["configs"].as_array().cloned().unwrap_or_default();
        let connected = |c: &Value| c["counts"]["connected"] == c["counts"]["configured"];
        if configs.len() == 2 && configs.iter().all(connected) {
            break;
        }
        assert!(started.elapsed() < LIMIT, "the pools never connected: {v}");
        std::thread::sleep(Duration::from_millis(200));
    }
    for doc in DOCS {
        let cases = trycmd::TestCases::new();
        cases
            .register_bin("gce-backend", std::path::Path::new(BIN))
            .env("GCE_BACKEND_ROOT_URL", &root)
            .env("GCE_BACKEND_TOKEN", &token)
            .insert_var("[ROOT]", root.clone())
            .unwrap()
            .case(format!("{root_dir}/{doc}"));
        cases.run();
    }
    crate::support::terminate(child.id());
    let _ = child.wait();
}
