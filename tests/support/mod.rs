//! The one harness of the integration tests, shared by every module: what the tests run on
//! (fixtures), the host's temporary directories and ports, the tests' tokens, the built binary,
//! the service in process (`Env`) or as `run` processes on one Redis (`Procs`), and the wall
//! clock for the few records compared with real time.
//!
//! Layout, bottom to top (each file imports only those below it):
//! - `fixtures`, `host`, `clock`, `tokens`: records and values (settings, Config files, dirs,
//!   ports, now, tokens);
//! - `bin`: the built binary, run and read line by line;
//! - `env`: the service in process on a simulator and a store (uses fixtures, host, tokens);
//! - `procs`: `run` processes on one private Redis and simulator (uses bin, fixtures, host).

mod bin;
mod clock;
mod env;
mod fixtures;
mod host;
mod procs;
pub(crate) mod tokens;

pub(crate) use bin::{BIN, embedded_default, lines, settings_file, spawn_run, terminate, wait_for};
pub(crate) use clock::wall_now;
pub(crate) use env::{Backend, Env};
pub(crate) use fixtures::{DEPLOYMENT, pool, settings, sim_config};
pub(crate) use host::{free_port, temp_dir};
pub(crate) use procs::Procs;
