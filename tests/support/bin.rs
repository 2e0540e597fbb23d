//! The built `gce-backend` binary as an operator runs it: a command to add to, and `run` with
//! the shipped settings whose output a test reads line by line.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The binary Cargo built for these tests.
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_gce-backend");

/// A command running the binary, to add arguments to.
pub(crate) fn gce_backend() -> Command {
    Command::new(BIN)
}

/// The shipped settings file (`config/service.toml`).
pub(crate) fn settings_file() -> String {
    format!("{}/config/service.toml", env!("CARGO_MANIFEST_DIR"))
}

/// Starts `gce-backend` with `args`, the shipped settings and the configs directory `configs`
/// (`RUST_LOG` unset); returns the process and its standard output and error, line by line.
pub(crate) fn spawn_run(
    args: &[&str],
    configs: &std::path::Path,
) -> (std::process::Child, mpsc::Receiver<String>, mpsc::Receiver<String>) {
    spawn_run_env(args, configs, &[])
}

/// [`spawn_run`] with `envs` set in its environment.
fn spawn_run_env(
    args: &[&str],
    configs: &std::path::Path,
    envs: &[(&str, &str)],
) -> (std::process::Child, mpsc::Receiver<String>, mpsc::Receiver<String>) {
    let mut child = gce_backend()
        .args(args)
        .envs(envs.iter().copied())
        .args(["--settings", &settings_file()])
        .arg("--configs")
        .arg(configs)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (out, err) = (lines(child.stdout.take().unwrap()), lines(child.stderr.take().unwrap()));
    (child, out, err)
}

/// `gce-backend run` as the README says over `configs` (no Redis, the API on a free loopback
/// port, an admin token made; `--quiet`), with `envs`: the process, its standard output's lines
/// after the token's, and the root URL and token it printed for its clients.
pub(crate) fn embedded_default(
    configs: &std::path::Path,
    envs: &[(&str, &str)],
) -> (std::process::Child, mpsc::Receiver<String>, String, String) {
    let (child, out, err) = spawn_run_env(&["run", "--quiet", "--listen", "127.0.0.1:0"], configs, envs);
    let line = wait_for(&out, "admin token for this run: export ");
    let said = line.trim_start_matches("admin token for this run: export ").to_owned();
    let var =
        |name: &str| said.split(' ').find_map(|w| w.strip_prefix(&format!("{name}="))).unwrap().to_owned();
    // Its log is read on (kept in the channel), so the process never blocks on a full pipe.
    std::thread::spawn(move || err.iter().for_each(drop));
    (child, out, var("GCE_BACKEND_ROOT_URL"), var("GCE_BACKEND_TOKEN"))
}

/// Sends each line of `r` to the returned channel.
pub(crate) fn lines(r: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(r).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                return;
            }
        }
    });
    rx
}

/// The first line of `rx` containing `what` (60 s at most).
pub(crate) fn wait_for(rx: &mpsc::Receiver<String>, what: &str) -> String {
    loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(l) if l.contains(what) => return l,
            Ok(_) => {}
            Err(e) => panic!("no line with {what:?}: {e}"),
        }
    }
}

/// Sends SIGTERM to process `pid` (a graceful stop; the caller waits for it).
pub(crate) fn terminate(pid: u32) {
    let _ = Command::new("kill").args(["-TERM", &pid.to_string()]).status();
}
