//! A worker's wait for work on a Redis queue: a blocking pop of the queue's signal list.

use std::time::Duration;

use async_trait::async_trait;
use redis::Value;

use crate::engine::{QueueError, Waiter};
use crate::link::Link;

/// Blocks on the queue's signal list over a connection of its own (a blocking pop would stall
/// a shared connection).
pub(super) struct RedisWaiter {
    /// The engine's link, from which the waiter's own is made.
    pub(super) link: Link,
    /// Its own link, opened at the first wait (and again after a lost one).
    pub(super) conn: Option<Link>,
    /// The queue's signal list.
    pub(super) signal: String,
}

#[async_trait]
impl Waiter for RedisWaiter {
    async fn wait(&mut self, timeout: Duration) -> Result<(), QueueError> {
        if self.conn.is_none() {
            self.conn = Some(self.link.dedicated().await?);
        }
        let conn = self.conn.as_mut().expect("connected above");
        // BLPOP takes seconds; a lost connection must not hang us, hence the outer timeout.
        let secs = timeout.as_secs_f64().max(0.01);
        let mut cmd = redis::cmd("BLPOP");
        cmd.arg(&self.signal).arg(secs);
        let pop = cmd.query_async::<Value>(conn);
        match tokio::time::timeout(timeout + Duration::from_secs(2), pop).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => {
                self.conn = None;
                Err(e.into())
            }
            Err(_) => {
                self.conn = None;
                Ok(())
            }
        }
    }
}
