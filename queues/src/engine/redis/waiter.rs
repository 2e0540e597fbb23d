//! A worker's wait for work on a Redis queue: a blocking pop of the queue's signal list.

use std::time::Duration;

use async_trait::async_trait;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, Value};

use crate::engine::{QueueError, Waiter};

/// Blocks on the queue's signal list over a connection of its own (a blocking pop would stall
/// a shared connection).
pub(super) struct RedisWaiter {
    /// Where to open the connection.
    pub(super) client: Client,
    /// Its connection, opened at the first wait (and again after a lost one).
    pub(super) conn: Option<MultiplexedConnection>,
    /// The queue's signal list.
    pub(super) signal: String,
}

#[async_trait]
impl Waiter for RedisWaiter {
    async fn wait(&mut self, timeout: Duration) -> Result<(), QueueError> {
        if self.conn.is_none() {
            let config = AsyncConnectionConfig::new()
                .set_connection_timeout(Some(Duration::from_secs(2)))
                .set_response_timeout(None);
            self.conn = Some(self.client.get_multiplexed_async_connection_with_config(&config).await?);
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
