//! Unit tests of `ports/guard.rs`.

use super::*;

fn guard(limit: usize) -> Guard {
    Guard::new(
        limit,
        &Isolation { trip_after: 2, open_base: Secs(10), open_cap: Secs(40), ..Isolation::default() },
    )
}

#[tokio::test(start_paused = true)]
async fn a_hanging_key_holds_at_most_its_limit_and_others_go_on() {
    let g = std::sync::Arc::new(guard(2));
    let hang = || std::future::pending::<Result<(), ()>>();
    let (a, b) = (g.clone(), g.clone());
    let t1 = tokio::spawn(async move { a.call("hang", Duration::from_secs(10), hang()).await });
    let t2 = tokio::spawn(async move { b.call("hang", Duration::from_secs(10), hang()).await });
    tokio::task::yield_now().await;
    // A third call waits for a slot (at most its timeout) instead of reaching the server.
    let third = g.call("hang", Duration::from_secs(1), hang()).await;
    assert_eq!(third, Err(Err(Refused::Busy(2))), "no third call reaches the hanging server");
    let other = g.call("good", Duration::from_secs(10), async { Ok::<_, ()>(7) }).await;
    assert_eq!(other, Ok(7));
    assert_eq!(t1.await.unwrap(), Err(Err(Refused::Timeout(Duration::from_secs(10)))));
    assert!(matches!(t2.await.unwrap(), Err(Err(Refused::Timeout(_)))));
    // Two timeouts in a row: open, so calls fail at once without reaching the server.
    assert!(g.open_for("hang").is_some());
    let r = g.call("hang", Duration::from_secs(10), async { Ok::<_, ()>(1) }).await;
    assert!(matches!(r, Err(Err(Refused::Open(_, 2)))), "{r:?}");
    // After the backoff a call goes through again; a success closes the breaker.
    tokio::time::advance(Duration::from_secs(11)).await;
    let r = g.call("hang", Duration::from_secs(10), async { Ok::<_, ()>(1) }).await;
    assert_eq!(r, Ok(1));
    assert!(g.open_for("hang").is_none());
}

#[tokio::test(start_paused = true)]
async fn the_calls_in_flight_when_it_opens_open_it_once() {
    let g = std::sync::Arc::new(guard(10));
    let calls: Vec<_> = (0..10)
        .map(|_| {
            let g = g.clone();
            tokio::spawn(async move {
                g.call("hang", Duration::from_secs(1), std::future::pending::<Result<(), ()>>()).await
            })
        })
        .collect();
    let mut refused = Vec::new();
    for c in calls {
        refused.push(c.await.unwrap().unwrap_err().unwrap_err());
    }
    let counts = g.lock().get("hang").map(|s| (s.opened, s.outages));
    assert_eq!(counts, Some((1, 2)), "opened once, by the first two");
    let open = g.open_for("hang").unwrap();
    // The two that opened it failed; the others' timeouts are the outage itself: held back.
    assert!(refused[..2].iter().all(|r| matches!(r, Refused::Timeout(_))), "{refused:?}");
    assert!(refused[2..].iter().all(|r| r.wait() == Some(open)), "{refused:?}");
    assert_eq!(open, Duration::from_secs(10), "the first opening's wait, not doubled by the others");
    let r = g.call("hang", Duration::from_secs(1), async { Ok::<_, ()>(1) }).await;
    assert_eq!(r.unwrap_err().unwrap_err().wait(), Some(open), "a refused call says how long to wait");
}

#[tokio::test(start_paused = true)]
async fn one_call_probes_and_its_timeout_opens_it_again_holding_its_task_back() {
    let g = std::sync::Arc::new(guard(10));
    let hang = || std::future::pending::<Result<(), ()>>();
    for _ in 0..2 {
        let _ = g.call("hang", Duration::from_secs(1), hang()).await;
    }
    let first = g.open_for("hang").unwrap();
    tokio::time::advance(first + Duration::from_millis(1)).await;
    let p = g.clone();
    let probe = tokio::spawn(async move { p.call("hang", Duration::from_secs(1), hang()).await });
    tokio::task::yield_now().await;
    // While the probe is out, the others are held back, not sent.
    let sent = std::sync::atomic::AtomicBool::new(false);
    let other = g
        .call("hang", Duration::from_secs(1), async {
            sent.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok::<_, ()>(())
        })
        .await;
    assert!(matches!(other, Err(Err(Refused::Open(..)))), "{other:?}");
    assert!(!sent.load(std::sync::atomic::Ordering::SeqCst), "not sent while the probe is out");
    // The probe's timeout is the outage itself: open again for twice as long, its task held.
    let r = probe.await.unwrap().unwrap_err().unwrap_err();
    let again = g.open_for("hang").unwrap();
    assert_eq!((r.wait(), again), (Some(first * 2), first * 2), "{r:?}");
    assert_eq!(g.lock().get("hang").map(|s| s.opened), Some(2));
    // The next probe answers: closed, calls go through.
    tokio::time::advance(again + Duration::from_millis(1)).await;
    assert_eq!(g.call("hang", Duration::from_secs(1), async { Ok::<_, ()>(3) }).await, Ok(3));
    assert_eq!(g.call("hang", Duration::from_secs(1), async { Ok::<_, ()>(4) }).await, Ok(4));
    assert!(g.open_for("hang").is_none());
}

#[tokio::test(start_paused = true)]
async fn quick_errors_do_not_trip_and_the_backoff_doubles() {
    let g = guard(4);
    for _ in 0..5 {
        let r = g.call("s", Duration::from_secs(1), async { Err::<(), _>("503") }).await;
        assert_eq!(r, Err(Ok("503")));
    }
    assert!(g.open_for("s").is_none(), "answers, even errors, keep it closed");
    let hang = || std::future::pending::<Result<(), &str>>();
    for _ in 0..2 {
        let _ = g.call("s", Duration::from_secs(1), hang()).await;
    }
    let first = g.open_for("s").unwrap();
    tokio::time::advance(first + Duration::from_millis(1)).await;
    let _ = g.call("s", Duration::from_secs(1), hang()).await;
    let second = g.open_for("s").unwrap();
    assert!(second > first, "{first:?} then {second:?}");
}
