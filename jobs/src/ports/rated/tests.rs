//! Unit tests of `ports/rated.rs`.

use super::*;
use crate::ports::buckets::MemoryBuckets;

#[tokio::test]
async fn a_call_past_its_projects_rate_is_not_sent_and_other_projects_go_on() {
    let fake = Arc::new(crate::testing::FakeCompute::default());
    let mut limits = RateLimits { read: Rate { rate: 1000.0, burst: 1000 }, ..RateLimits::default() };
    limits.projects.insert(
        "slow".into(),
        ProjectRates { read: Some(Rate { rate: 1.0, burst: 1 }), ..Default::default() },
    );
    let rated =
        RatedCompute::new(fake.clone(), Arc::new(MemoryBuckets::default()), limits, &Metrics::default());
    rated.get("slow", "z", "a").await.unwrap();
    let e = rated.get("slow", "z", "b").await.unwrap_err();
    assert_eq!(e.kind, Kind::Throttled);
    assert!(e.retry_after.unwrap() > SHORT, "{e:?}");
    for i in 0..50 {
        rated.get("fast", "z", &format!("i{i}")).await.unwrap();
    }
    let sent = fake.calls().iter().filter(|c| c.starts_with("get ")).count();
    assert_eq!(sent, 51, "the throttled call was not sent; the other project's were");
}
