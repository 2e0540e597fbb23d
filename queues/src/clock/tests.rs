//! Unit tests of `clock.rs`: the queue and the memory engine read the time from the clock they
//! are given.

use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};

use super::*;
use crate::engine::{Engine, PushItem, QueueSpec, When, WorkerId};
use crate::{MemoryEngine, Policy, Queue};

/// A clock the test moves by hand.
#[derive(Debug)]
struct Fixed(Mutex<DateTime<Utc>>);

impl Fixed {
    fn advance(&self, by: Duration) {
        let mut t = self.0.lock().unwrap();
        *t += chrono::Duration::from_std(by).unwrap();
    }
}

impl Clock for Fixed {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap()
    }
}

fn fixed(ms: i64) -> Arc<Fixed> {
    Arc::new(Fixed(Mutex::new(Utc.timestamp_millis_opt(ms).unwrap())))
}

#[test]
fn milliseconds_since_the_epoch() {
    assert_eq!(fixed(1_234).now_ms(), 1_234);
    assert_eq!(fixed(-5).now_ms(), 0, "before the epoch reads as 0");
}

#[tokio::test]
async fn a_delayed_task_is_due_when_the_engine_clock_says_so() {
    let clock = fixed(1_000_000);
    let engine = MemoryEngine::with_clock(clock.clone());
    let spec = QueueSpec::new("clocked", Policy::default()).unwrap();
    let item = PushItem { key: "k".into(), payload: "{}".into(), delay_ms: 60_000, hurry: false };
    engine.push(&spec, &[item]).await.unwrap();
    let worker = WorkerId { group: "g".into(), id: "w".into() };
    let taken = engine.take(&spec, &worker, 10).await.unwrap();
    assert!(taken.tasks.is_empty());
    assert_eq!(taken.next_due, Some(Duration::from_secs(60)));
    clock.advance(Duration::from_secs(60));
    assert_eq!(engine.take(&spec, &worker, 10).await.unwrap().tasks.len(), 1);
}

#[tokio::test]
async fn a_push_at_a_time_is_delayed_from_the_queue_clock() {
    let clock = fixed(1_000_000);
    let engine = MemoryEngine::with_clock(clock.clone());
    let spec = QueueSpec::new("at", Policy::default()).unwrap();
    let q = Queue::new(Arc::new(engine.clone()), spec.clone()).with_clock(clock.clone());
    let at = Utc.timestamp_millis_opt(1_030_000).unwrap();
    q.push("k", &1, When::At(at)).await.unwrap();
    let worker = WorkerId { group: "g".into(), id: "w".into() };
    let taken = engine.take(&spec, &worker, 10).await.unwrap();
    assert_eq!(taken.next_due, Some(Duration::from_secs(30)));
    clock.advance(Duration::from_secs(30));
    assert_eq!(engine.take(&spec, &worker, 10).await.unwrap().tasks.len(), 1);
}
