//! What `/metrics` shows: every metric family of one lockwarden instance, and its rendering
//! in Prometheus' classic text format (the default) or in OpenMetrics (when a scraper asks
//! for it, see [`Format::negotiate`]).
//!
//! Built on the `prometheus` crate (the TiKV project's client), because it fits an instance
//! that owns its metrics: each [`Metrics`] has a registry of its own (tests run several
//! instances in one process, which a process-wide recorder, as the `metrics` crate's
//! exporters install, would mix up), its counters and histograms are fixed-size atomics that
//! need no upkeep between scrapes, and its text encoder writes the classic format that
//! `promtool check metrics` (2.42, Debian 12) accepts. OpenMetrics, which it lacks, is
//! written by [`openmetrics`] from the same gathered families.
//!
//! Recording is cheap on the hot path: every labelled family except the HTTP one holds its
//! series from the start ([`labels::Labeled`]), so recording is an index and an atomic add.
//! No label ever carries a lock name, an owner or a concrete path, so the number of series
//! is fixed by the code (see docs/api.md, "Metrics", for every family and label value).
//! Beside them, [`standard`] adds what Prometheus expects of any exporter: build info and
//! the `process_*` families. How waits and holds end, and how long they took, is recorded
//! by `holds.rs`; the ZooKeeper store's families are [`zookeeper`].

use std::time::Duration;

use prometheus::core::Collector;
use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
    TextEncoder,
};
use tracing::warn;

mod holds;
pub mod labels;
pub mod openmetrics;
mod resources;
pub mod scrape;
mod standard;
pub mod zookeeper;

pub use holds::{HoldEnd, WaitOutcome};
pub use openmetrics::Format;
pub use resources::PER_RESOURCE;

use labels::{label_values, Labeled};

/// Buckets for latencies, from half a millisecond to 30 s (the longest a request may take).
pub const LATENCY_BUCKETS: [f64; 15] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Buckets for waits and holds, which last from milliseconds to hours.
pub const SPAN_BUCKETS: [f64; 14] = [
    0.001, 0.01, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 21600.0,
];

label_values!(
    /// Which limit turned a waiting acquire away.
    WaitLimit { PerLock = "per_lock", PerInstance = "per_instance" }
);

label_values!(
    /// Why a waiting call woke up.
    Wakeup { Record = "record", Predecessor = "predecessor", Timer = "timer", Handed = "handed" }
);

label_values!(
    /// How the head's wait for a release on its own instance ended without one (see
    /// `service::joining::await_release_here`).
    HeadGrace { RanOut = "ran_out", Missed = "missed" }
);

label_values!(
    /// How a waiting call's queue entry was made (see `service::group_commit`).
    JoinedBy { HandOff = "hand_off", Alone = "alone" }
);

label_values!(
    /// What became of a webhook delivery.
    WebhookResult {
        Delivered = "delivered",
        AttemptFailed = "attempt_failed",
        GivenUp = "given_up",
        RefusedTarget = "refused_target",
    }
);

label_values!(
    /// What an admin force release found.
    ForceOutcome { Released = "released", AlreadyFree = "already_free", Failed = "failed" }
);

/// One instance's metrics. Counters, histograms and gauges are handles into its registry.
pub struct Metrics {
    registry: Registry,
    pub grants: IntCounter,
    pub handoffs: IntCounter,
    pub expirations: IntCounter,
    pub preemptions: IntCounter,
    pub takeovers: IntCounter,
    pub force_releases: Labeled<IntCounter, ForceOutcome>,
    pub waits_started: IntCounter,
    pub waits_refused: Labeled<IntCounter, WaitLimit>,
    pub wakeups: Labeled<IntCounter, Wakeup>,
    pub head_graces: Labeled<IntCounter, HeadGrace>,
    pub queue_reads_saved: IntCounter,
    pub event_hub_reads: IntCounter,
    pub queue_joins: Labeled<IntCounter, JoinedBy>,
    pub webhooks: Labeled<IntCounter, WebhookResult>,
    /// By route template, method and outcome: made on first use, as the outcomes of a route
    /// are few but not known up front.
    requests: HistogramVec,
    acquire_waits: Labeled<Histogram, WaitOutcome>,
    holds: Labeled<Histogram, HoldEnd>,
    pub handoff_writes: Histogram,
    pub locks_held: IntGauge,
    pub waiting_calls: IntGauge,
    pub joins_seated: IntGauge,
    pub webhook_queue: IntGauge,
    pub event_streams: IntGauge,
    zookeeper: zookeeper::Families,
    standard: standard::Standard,
}

/// Registers `family`; the names are fixed in the code, so a failure is a bug.
fn register<C: Collector + Clone + 'static>(
    registry: &Registry,
    family: Result<C, prometheus::Error>,
) -> C {
    let family = family.expect("a valid metric family");
    registry
        .register(Box::new(family.clone()))
        .expect("a metric family registered once");
    family
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let r = &registry;
        let counter = |name: &str, help: &str| register(r, IntCounter::new(name, help));
        let gauge = |name: &str, help: &str| register(r, IntGauge::new(name, help));
        let counters = |name: &str, help: &str, label: &str| {
            register(r, IntCounterVec::new(Opts::new(name, help), &[label]))
        };
        let histograms = |name: &str, help: &str, labels: &[&str], buckets: &[f64]| {
            let opts = HistogramOpts::new(name, help).buckets(buckets.to_vec());
            register(r, HistogramVec::new(opts, labels))
        };
        Metrics {
            grants: counter("lockwarden_grants_total", "Locks granted without waiting."),
            handoffs: counter(
                "lockwarden_handoffs_total",
                "Locks passed to a waiter (by a release, or taken by the waiter itself).",
            ),
            expirations: counter(
                "lockwarden_expirations_total",
                "Grants that took a lock whose holder's lease had run out (lazy expiry).",
            ),
            preemptions: counter(
                "lockwarden_preemptions_total",
                "Callers that became a lock's requestor, asking its holder to clean up.",
            ),
            takeovers: counter(
                "lockwarden_takeovers_total",
                "Preemptors that took a lock from its live holder.",
            ),
            force_releases: Labeled::of(&counters(
                "lockwarden_force_releases_total",
                "Admin force releases, by what they found.",
                "outcome",
            )),
            waits_started: counter(
                "lockwarden_waits_total",
                "Acquire calls that joined a queue.",
            ),
            waits_refused: Labeled::of(&counters(
                "lockwarden_waits_refused_total",
                "Acquire calls refused with too_many_waiters, by the limit they met.",
                "limit",
            )),
            wakeups: Labeled::of(&counters(
                "lockwarden_waiter_wakeups_total",
                "Times a waiting call woke up, by cause.",
                "cause",
            )),
            head_graces: Labeled::of(&counters(
                "lockwarden_head_graces_total",
                "Waits of a queue's head for a release on its own instance that ended without one: ran out (the waiter then watched the record), or missed (another instance had handed it the lock meanwhile).",
                "outcome",
            )),
            queue_reads_saved: counter(
                "lockwarden_queue_reads_saved_total",
                "Releases, renewals and waiters that used what this instance remembered from its last hand-off of the lock instead of reading the queue.",
            ),
            event_hub_reads: counter(
                "lockwarden_event_hub_reads_total",
                "Store reads the event hub made for this instance's event streams: a snapshot, a changed lock, or a lease end that came.",
            ),
            queue_joins: Labeled::of(&counters(
                "lockwarden_queue_joins_total",
                "Queue entries made for waiting calls: in the transaction of a hand-off of the same lock (a group commit), or alone.",
                "how",
            )),
            webhooks: Labeled::of(&counters(
                "lockwarden_webhooks_total",
                "Webhook deliveries, by result.",
                "result",
            )),
            requests: histograms(
                "lockwarden_http_request_duration_seconds",
                "Time from a request's arrival to its response head, by route template, method and outcome (ok, or the error code).",
                &["route", "method", "outcome"],
                &LATENCY_BUCKETS,
            ),
            acquire_waits: Labeled::of(&histograms(
                "lockwarden_acquire_wait_seconds",
                "Time acquire calls that joined a queue spent from arrival to their answer, by outcome.",
                &["outcome"],
                &SPAN_BUCKETS,
            )),
            holds: Labeled::of(&histograms(
                "lockwarden_lock_hold_seconds",
                "Time from a grant to the end of its hold, for holds this instance saw end, by how they ended.",
                &["end"],
                &SPAN_BUCKETS,
            )),
            handoff_writes: register(
                r,
                Histogram::with_opts(
                    HistogramOpts::new(
                        "lockwarden_handoff_write_seconds",
                        "Time a release's hand-off write (one ZooKeeper multi) took.",
                    )
                    .buckets(LATENCY_BUCKETS.to_vec()),
                ),
            ),
            locks_held: gauge(
                "lockwarden_locks_held",
                "Locks whose last write by this instance left them held, with the lease still running.",
            ),
            waiting_calls: gauge(
                "lockwarden_waiters",
                "Acquire calls waiting in a queue on this instance.",
            ),
            joins_seated: gauge(
                "lockwarden_queue_joins_waiting",
                "Acquire calls waiting to join a queue with the next hand-off of its lock on this instance (a group commit).",
            ),
            webhook_queue: gauge(
                "lockwarden_webhook_queue_depth",
                "Webhook events waiting for a free delivery slot of their target.",
            ),
            event_streams: gauge(
                "lockwarden_event_stream_subscribers",
                "Event streams (Server-Sent Events) open on this instance.",
            ),
            zookeeper: zookeeper::Families::register(r),
            standard: standard::Standard::register(r),
            registry,
        }
    }

    /// The series the ZooKeeper store records into; only it calls this.
    pub fn zookeeper(&self) -> zookeeper::ZkMetrics {
        self.zookeeper.series()
    }

    /// Records one HTTP request. `route` is the route template, never the concrete path.
    pub fn request_took(&self, route: &str, method: &str, outcome: &str, took: Duration) {
        self.requests
            .with_label_values(&[route, method, outcome])
            .observe(took.as_secs_f64());
    }

    /// Every family, in the format asked for.
    pub fn render(&self, format: Format) -> String {
        self.render_with(format, &[])
    }

    /// Every family, in the format asked for, with the families each of `others` (another
    /// resource's metrics, by its `resource` label value) records merged in (see
    /// [`resources`]).
    pub fn render_with(&self, format: Format, others: &[(&str, &Metrics)]) -> String {
        self.standard.update();
        let families = resources::merged(self.registry.gather(), others);
        match format {
            Format::Classic => {
                let mut text = String::new();
                if let Err(error) = TextEncoder::new().encode_utf8(&families, &mut text) {
                    warn!(%error, "cannot render the metrics");
                }
                text
            }
            Format::OpenMetrics => openmetrics::encode(&families),
        }
    }
}

#[cfg(test)]
mod tests;
