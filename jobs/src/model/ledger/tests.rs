//! The ledger's arithmetic: intervals closed and open, across month ends, read at any instant.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, TimeZone, Utc};

use super::*;

fn at(d: u32, h: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, d, h, 0, 0).unwrap()
}

fn meter(state: Billed, since: DateTime<Utc>, rate: u64) -> Metered {
    Metered { state, since, rate, unknown: Default::default() }
}

/// The store's side: what the changes add up to.
fn apply(book: &mut BTreeMap<String, i64>, s: &Spend) {
    for (k, v) in s.pairs() {
        *book.entry(k.to_owned()).or_default() += v;
    }
    book.retain(|_, v| *v != 0);
}

#[test]
fn an_open_interval_accrues_as_time_passes_and_closing_it_keeps_the_same_total() {
    let mut book = BTreeMap::new();
    let m = meter(Billed::Running, at(2, 0), 100_000); // $0.10 an hour
    apply(&mut book, &spend(None, Some(&m), at(2, 0)));
    let l = ledger(&book, at(2, 10));
    let nov = l.month("2026-11")[&Billed::Running];
    assert!((nov.hours - 10.0).abs() < 1e-9, "{nov:?}");
    assert!((nov.usd - 1.0).abs() < 1e-9, "{nov:?}");
    assert_eq!(l.vms[&Billed::Running], 1);
    assert!((l.per_hour() - 0.1).abs() < 1e-12);

    // Suspended at 10:00: the running hours close, the suspended ones begin.
    let s = meter(Billed::Suspended, at(2, 10), 10_000);
    apply(&mut book, &spend(Some(&m), Some(&s), at(2, 10)));
    let l = ledger(&book, at(2, 20));
    let nov = l.month("2026-11");
    assert!((nov[&Billed::Running].hours - 10.0).abs() < 1e-9, "{nov:?}");
    assert!((nov[&Billed::Running].usd - 1.0).abs() < 1e-9, "{nov:?}");
    assert!((nov[&Billed::Suspended].hours - 10.0).abs() < 1e-9, "{nov:?}");
    assert!((nov[&Billed::Suspended].usd - 0.1).abs() < 1e-9, "{nov:?}");
    assert_eq!(l.vms.get(&Billed::Running).copied().unwrap_or(0), 0);

    // Deleted: nothing open, nothing more accrues.
    apply(&mut book, &spend(Some(&s), None, at(2, 20)));
    assert!(book.keys().all(|k| k.starts_with("c/")), "{book:?}");
    let later = ledger(&book, at(25, 0));
    assert_eq!(later.month("2026-11"), ledger(&book, at(2, 20)).month("2026-11"));
    assert_eq!(later.per_hour(), 0.0);
}

#[test]
fn an_interval_across_a_month_end_is_split_at_it_open_or_closed() {
    let since = Utc.with_ymd_and_hms(2026, 10, 31, 22, 0, 0).unwrap();
    let m = meter(Billed::Running, since, 360_000); // $0.36 an hour
    let mut open = BTreeMap::new();
    apply(&mut open, &spend(None, Some(&m), since));
    let now = at(1, 3);
    let read = ledger(&open, now);
    assert!((read.month("2026-10")[&Billed::Running].hours - 2.0).abs() < 1e-9);
    assert!((read.month("2026-11")[&Billed::Running].hours - 3.0).abs() < 1e-9);
    assert!((read.month("2026-11")[&Billed::Running].usd - 1.08).abs() < 1e-9);

    let mut closed = open.clone();
    apply(&mut closed, &spend(Some(&m), None, now));
    let read_closed = ledger(&closed, now + Duration::days(40));
    for month in ["2026-10", "2026-11"] {
        let (a, b) = (read.month(month)[&Billed::Running], read_closed.month(month)[&Billed::Running]);
        assert!((a.hours - b.hours).abs() < 1e-9 && (a.usd - b.usd).abs() < 1e-6, "{month}: {a:?} {b:?}");
    }
    assert!(read_closed.month("2026-12").is_empty());
}

#[test]
fn an_interval_open_for_months_fills_each_month_whole() {
    let since = Utc.with_ymd_and_hms(2026, 9, 30, 12, 0, 0).unwrap();
    let mut book = BTreeMap::new();
    apply(&mut book, &spend(None, Some(&meter(Billed::Stopped, since, 1_000)), since));
    let l = ledger(&book, at(1, 0));
    assert!((l.month("2026-09")[&Billed::Stopped].hours - 12.0).abs() < 1e-9);
    assert!((l.month("2026-10")[&Billed::Stopped].hours - 31.0 * 24.0).abs() < 1e-9);
    assert!(!l.months.contains_key("2026-11"), "{l:?}");
}

#[test]
fn the_same_meter_written_again_changes_nothing_and_many_vms_sum() {
    let m = meter(Billed::Running, at(3, 0), 50_000);
    assert!(spend(Some(&m), Some(&m), at(4, 0)).is_empty());
    let mut book = BTreeMap::new();
    for h in 0..10 {
        let m = meter(Billed::Running, at(3, h), 50_000);
        apply(&mut book, &spend(None, Some(&m), at(3, h)));
    }
    // Ten VMs started at 00:00 … 09:00, read at 10:00: 10 + 9 + … + 1 hours.
    let l = ledger(&book, at(3, 10));
    assert!((l.month("2026-11")[&Billed::Running].hours - 55.0).abs() < 1e-9);
    assert!((l.month("2026-11")[&Billed::Running].usd - 2.75).abs() < 1e-9);
    assert_eq!(l.vms[&Billed::Running], 10);
}

#[test]
fn a_field_of_no_known_shape_is_left_out() {
    let book = BTreeMap::from([("x/2026-11/running/s".to_owned(), 7), ("c/2026-13/running/s".to_owned(), 7)]);
    assert_eq!(ledger(&book, at(2, 0)), Ledger::default());
}
