//! The single integration test binary of the root package (tests that need the built
//! `gce-backend` binary, a private `redis-server`, or both).

/// Worker processes on Redis: kill -9 mid-run, SIGTERM shutdown.
mod queue_processes;
