//! Unit tests of `ports/guarded.rs`.

use super::*;

/// A Swarming whose server `hang.example.com` never answers.
#[derive(Debug)]
struct Hanging(Arc<crate::testing::FakeBots>);

#[async_trait]
impl Bots for Hanging {
    async fn get(&self, server: &str, id: &str) -> Result<Option<Bot>, BotError> {
        if server.contains("hang") {
            std::future::pending::<()>().await;
        }
        self.0.get(server, id).await
    }
    async fn list(&self, s: &str, c: Option<String>) -> Result<(Vec<Bot>, Option<String>), BotError> {
        self.0.list(s, c).await
    }
    async fn events(&self, s: &str, id: &str, t: DateTime<Utc>) -> Result<Vec<BotEvent>, BotError> {
        self.0.events(s, id, t).await
    }
    async fn terminate(&self, s: &str, id: &str) -> Result<(), BotError> {
        self.0.terminate(s, id).await
    }
    async fn delete(&self, s: &str, id: &str) -> Result<bool, BotError> {
        self.0.delete(s, id).await
    }
    async fn count_pending(&self, s: &str, tags: &[String], t: DateTime<Utc>) -> Result<u32, BotError> {
        self.0.count_pending(s, tags, t).await
    }
}

#[tokio::test(start_paused = true)]
async fn a_hanging_server_times_out_trips_and_fails_fast_while_others_answer() {
    let iso = Isolation::default();
    let bots = Arc::new(GuardedBots::new(Arc::new(Hanging(Arc::default())), &iso, &Metrics::default()));
    let hang = "https://hang.example.com";
    for _ in 0..iso.trip_after {
        let e = bots.get(hang, "b").await.unwrap_err();
        assert!(e.kind == BotErrorKind::Unavailable && e.message.contains("no answer within"), "{e}");
    }
    let e = bots.get(hang, "b").await.unwrap_err();
    assert!(e.kind == BotErrorKind::Unavailable && e.message.contains("circuit open"), "{e}");
    // Held back until the breaker lets a call through, not failed.
    let held = crate::error::TaskError::from(e.clone()).throttled();
    assert!(held.is_some() && held == e.retry_after, "{e:?}");
    assert_eq!(bots.get("https://swarm.example.com", "b").await.unwrap(), None, "the good server answers");
}
