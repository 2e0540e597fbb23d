//! The `gce-backend` binary. Everything it does lives in the library (`gce_backend::cli`), so
//! it is compiled once, there: this file only picks the allocator.

fn main() -> std::process::ExitCode {
    gce_backend::cli::main()
}

/// mimalloc: a task's many small allocations (records, requests, replies) cost less than with
/// the system allocator (measured: 14 % less CPU per VM in `scripts/bench-scale`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
