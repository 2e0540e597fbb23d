//! The single integration test binary of the root package (tests that need the built
//! `gce-backend` binary, a private `redis-server`, the simulator, or several of them).

/// The operator's API over HTTP: flows, schemas, the authz matrix, random bodies.
mod api;
/// Bad records of each kind at once, confined to their entity.
mod bad_input;
/// Operator writes wait for the replicas (503 when none acknowledges).
mod replicas;

/// The circuit breaker: a broken image opens it, a fixed one's canary closes it.
mod breaker;
/// A tenant's budget holds a demand burst at its limit, cuts no task, and lets it grow.
mod budget;
/// Bulk creation under Compute Engine's default API quotas; a worker killed mid-bulk.
mod bulk;
/// `docker-compose.yml` run without Docker: every service's command and healthcheck.
mod compose;
/// What the Compute adapter sends, as Compute's types: every instance attribute, typed.
mod compute_bodies;
/// Google credentials end to end: metadata-server and key-file tokens, renewal, an outage.
mod credentials;
/// Demand-driven pools and warm pools: a burst, the quiet, a resume, Swarming down.
mod demand;
/// The docs' example commands and outputs, run as written against the embedded default.
mod docs_examples;
/// Errors name the fault: a 503 storm recorded as 503 and its count, then marked resolved.
mod errors_named;
/// Derived keys heal from the VM records; cron jobs run past a key of the wrong type.
mod heal;
/// Metering across processes and a kill: each interval in the ledger once.
mod metering;
/// `/metrics`: one scrape after convergence, bounded labels, a workers process's own.
mod metrics;
/// The store's move to the key layout of a cluster (`recover migrate`).
mod migrate;
/// Operator safety: Config mistakes, ownership, bounded fan-out, preemption, the queue CLI.
mod operator_safety;
/// A Compute outage: tasks held back, not failed; the outage said once in the log.
mod outage;
/// The reconcile pipeline end to end: (i)–(v) on Redis and embedded.
mod pipeline;
/// The pipeline under faults: (vi)–(x).
mod pipeline_faults;
/// Plans: each kind of change planned, applied and compared with what happened.
mod plan;
/// Worker processes on Redis: kill -9 mid-run, SIGTERM shutdown.
mod queue_processes;
/// Ranked fallbacks: a stockout of rank 0's machine type moves a pool to rank 1, and back.
mod ranks;
/// Rate limits per Compute project: shared by processes, never holding up another project.
mod rate_limits;
/// Rolling updates: a new image with a surge, never fewer connected bots than the amount.
mod rollout;
/// Spot pools: preemption is a counted replacement, never a zone backoff.
mod spot;
/// `run` at start (inputs, Redis), and dead tasks on a Config's status.
mod startup;
/// A static pool: listed machines watched, edited, drained; the API refuses other means.
mod static_pool;
/// The Store contract on memory and Redis.
mod store;
/// Counts are O(1): per-Config sums kept with every VM write, exact, on memory and Redis.
mod sums;
/// The one harness every module shares: fixtures, the service in process or as processes, the
/// binary, tokens, temporary directories, ports and the wall clock.
mod support;
/// Instance templates: one per Config revision, named by bulk inserts, removed once unused.
mod templates;
/// The dashboard in headless Chromium (WebDriver) on the binary, Redis and the simulator.
mod ui;
/// Two builds on one Redis (a rolling upgrade): nothing another build stored is lost or
/// destroyed.
mod upgrade;
/// The configs directory watched: a file written is imported at once.
mod watch;
/// Multi-zone Configs: spread by weight, a stockout moves creation at once.
mod zones;
