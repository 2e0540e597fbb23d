//! The `/proc` files of a process read into its resources; a missing or odd file leaves its
//! values out rather than reporting a false zero.

use super::{Reading, parse};

const STAT: &str = "4242 (gce backend (x)) S 1 4242 4242 0 -1 4194560 5000 0 0 0 250 130 0 0 20 0 9 0 \
                    360000 1000000 2000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
const STATUS: &str = "Name:\tgce-backend\nVmSize:\t  204800 kB\nVmRSS:\t   51200 kB\nThreads:\t9\n";
const SYSTEM_STAT: &str = "cpu  1 2 3 4\nbtime 1780000000\nprocesses 10\n";
const LIMITS: &str = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 524288               files\n";

#[test]
fn cpu_memory_threads_start_time_and_the_fd_limit_are_read_from_proc() {
    let r = parse(STAT, STATUS, SYSTEM_STAT, LIMITS);
    assert_eq!(
        r,
        Reading {
            cpu_seconds: Some(3.8),
            resident_bytes: Some(51200.0 * 1024.0),
            virtual_bytes: Some(204800.0 * 1024.0),
            threads: Some(9.0),
            start_time: Some(1_780_000_000.0 + 3600.0),
            open_fds: None,
            max_fds: Some(1024.0),
        }
    );
}

#[test]
fn files_that_are_missing_or_cut_short_leave_their_values_out() {
    assert_eq!(parse("", "", "", ""), Reading::default());
    let r = parse("4242 (x) S 1 2", STATUS, "", "");
    assert_eq!((r.cpu_seconds, r.start_time), (None, None));
    assert_eq!(r.threads, Some(9.0));
}
