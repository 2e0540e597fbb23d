//! The `task` span every handler runs in, and the one `task dead` line of a run that sends its
//! task to the dead set (memory engine, a real apalis worker).
//!
//! One test in this binary, with a process-wide subscriber: `tracing` caches per call site whether
//! anyone listens, so a thread-scoped subscriber raced by other tests' threads could miss spans.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apalis::prelude::*;
use gce_backend_queues::testing::{eventually, stoppable};
use gce_backend_queues::{MemoryEngine, Policy, Queue, QueueSpec, When, outcome};
use serde::{Deserialize, Serialize};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Job {
    n: u64,
}

/// A subscriber that records events with the spans they happened in.
type Fields = BTreeMap<String, String>;

#[derive(Debug, Clone)]
struct Captured {
    level: Level,
    fields: Fields,
    /// (name, fields) of every span entered when it happened, outermost first.
    spans: Vec<(String, Fields)>,
}

#[derive(Debug, Default)]
struct State {
    spans: HashMap<u64, (String, Fields)>,
    stack: Vec<u64>,
    events: Vec<Captured>,
}

#[derive(Debug, Clone, Default)]
struct Capture {
    next: Arc<AtomicU64>,
    state: Arc<Mutex<State>>,
}

struct Visitor<'a>(&'a mut Fields);

impl Visit for Visitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.insert(field.name().into(), format!("{value:?}"));
    }
}

impl Subscriber for Capture {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::sometimes()
    }
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let id = self.next.fetch_add(1, Ordering::SeqCst) + 1;
        let mut fields = Fields::new();
        attrs.record(&mut Visitor(&mut fields));
        self.state.lock().unwrap().spans.insert(id, (attrs.metadata().name().into(), fields));
        Id::from_u64(id)
    }
    fn record(&self, span: &Id, values: &Record<'_>) {
        if let Some((_, fields)) = self.state.lock().unwrap().spans.get_mut(&span.into_u64()) {
            values.record(&mut Visitor(fields));
        }
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields::new();
        event.record(&mut Visitor(&mut fields));
        let mut state = self.state.lock().unwrap();
        let spans = state.stack.iter().filter_map(|id| state.spans.get(id).cloned()).collect();
        state.events.push(Captured { level: *event.metadata().level(), fields, spans });
    }
    fn enter(&self, span: &Id) {
        self.state.lock().unwrap().stack.push(span.into_u64());
    }
    fn exit(&self, span: &Id) {
        let mut state = self.state.lock().unwrap();
        if let Some(at) = state.stack.iter().rposition(|id| *id == span.into_u64()) {
            state.stack.remove(at);
        }
    }
}

impl Capture {
    fn events(&self, message: &str) -> Vec<Captured> {
        let state = self.state.lock().unwrap();
        state
            .events
            .iter()
            .filter(|e| e.fields.get("message").map(String::as_str) == Some(message))
            .cloned()
            .collect()
    }
}

// One runtime thread, so the stack of entered spans is that of the task being polled.
#[tokio::test(flavor = "current_thread")]
async fn handler_lines_carry_the_task_span_and_a_dead_run_logs_one_warning() {
    let capture = Capture::default();
    tracing::subscriber::set_global_default(capture.clone()).expect("the only subscriber of this binary");
    let policy = Policy { max_attempts: 3, lease: Duration::from_secs(2), ..Policy::default() };
    let q = Queue::new(Arc::new(MemoryEngine::new()), QueueSpec::new("spans", policy).unwrap());
    let worker = WorkerBuilder::new("spans").backend(q.backend::<Job>("host")).concurrency(2).build(
        |job: Job| async move {
            tracing::info!(n = job.n, "handling");
            if job.n == 1 { Err(outcome::permanent("no such zone")) } else { Ok(()) }
        },
    );
    let (stop, worker) = stoppable(|stop| worker.run_until(stop));
    let ok = q.push("vm-0", &Job { n: 0 }, When::Now).await.unwrap().task_id().to_owned();
    let bad = q.push("vm-1", &Job { n: 1 }, When::Now).await.unwrap().task_id().to_owned();
    eventually("one task completes and one goes dead", Duration::from_secs(10), || async {
        let c = q.counts().await.unwrap();
        (c.done == 1 && c.dead == 1).then_some(())
    })
    .await;
    stop.send(()).unwrap();
    worker.await.unwrap().expect("the worker ends cleanly");

    let handled = capture.events("handling");
    assert_eq!(handled.len(), 2, "{handled:#?}");
    for e in &handled {
        let n = &e.fields["n"];
        let (_, span) = e.spans.iter().find(|(name, _)| name == "task").unwrap_or_else(|| panic!("{e:#?}"));
        let id = if n == "0" { &ok } else { &bad };
        let expected: Fields =
            [("queue", "spans"), ("task", id.as_str()), ("key", &format!("vm-{n}")), ("attempt", "1")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
        assert_eq!(span, &expected, "{e:#?}");
    }

    let dead = capture.events("task dead");
    assert_eq!(dead.len(), 1, "{dead:#?}");
    let f = &dead[0].fields;
    assert_eq!(dead[0].level, Level::WARN);
    let got: Vec<&str> =
        ["queue", "task", "key", "attempts", "reason"].iter().map(|k| f[*k].as_str()).collect();
    assert_eq!(got, ["spans", bad.as_str(), "vm-1", "1", "permanent"]);
    assert!(f["error"].contains("no such zone"), "{f:?}");
}
