//! The ZooKeeper store's metrics: request latency by operation, store errors by kind, the
//! session's state, and the probes of a session whose requests time out. The families are
//! registered with every instance's registry, but their series are made only by
//! [`Families::series`], which only the ZooKeeper store calls: an instance on the in-memory
//! store shows none of them (a registry leaves out a family without series).

use std::future::Future;
use std::time::Instant;

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry};

use super::labels::{label_values, LabelValue, Labeled};
use super::{register, LATENCY_BUCKETS};

label_values!(
    /// A ZooKeeper request, as the `operation` label names it.
    ZkOp {
        GetData = "get_data",
        GetChildren = "get_children",
        /// A read-only transaction: a record and its queue in one request.
        MultiRead = "multi_read",
        /// `exists`, with or without a watch.
        Exists = "exists",
        Create = "create",
        SetData = "set_data",
        Delete = "delete",
        /// A transaction (every record write is one).
        Multi = "multi",
        Sync = "sync",
    }
);

label_values!(
    /// Why a store call failed, as the `kind` label names it.
    StoreErrorKind {
        /// No live session: nothing was sent.
        NoSession = "no_session",
        /// No answer within the request's deadline.
        Timeout = "timeout",
        ConnectionLoss = "connection_loss",
        /// The session expired, moved or was closed.
        SessionLost = "session_lost",
        /// Authentication failed, or the ACLs refuse the request.
        Auth = "auth",
        Throttled = "throttled",
        Other = "other",
    }
);

label_values!(
    /// How a record write went to ZooKeeper, as the `how` label names it.
    WriteSharing {
        /// In a `multi` of its own.
        Alone = "alone",
        /// In a `multi` shared with other record writes.
        Shared = "shared",
    }
);

label_values!(
    /// What came of probing a connected session whose requests timed out (see
    /// `store::zk::session`), as the `outcome` label names it.
    ProbeOutcome {
        /// The server answered in time: it is slow, not stalled; the session is kept.
        Answered = "answered",
        /// No answer within a session timeout while connected: the session was given up.
        Abandoned = "abandoned",
        /// No answer, but the connection was lost meanwhile: reconnecting is left to the
        /// client, as for any lost connection.
        Disconnected = "disconnected",
    }
);

label_values!(
    /// The state of the instance's ZooKeeper session, as the `state` label names it.
    SessionState {
        /// No session: the first one, or a new one after the last expired, is being made.
        Connecting = "connecting",
        Connected = "connected",
        /// Connected to a read-only server: reads work, writes fail.
        ReadOnly = "read_only",
        /// The session lives but its connection was lost; the client is reconnecting.
        Disconnected = "disconnected",
    }
);

/// The registered families, without series until a ZooKeeper store asks for them.
pub(super) struct Families {
    operations: HistogramVec,
    errors: IntCounterVec,
    session: IntGaugeVec,
    stand_in: IntGaugeVec,
    record_writes: IntCounterVec,
    writes_waiting: IntGaugeVec,
    probes: IntCounterVec,
    contradictions: IntCounterVec,
}

impl Families {
    pub(super) fn register(registry: &Registry) -> Families {
        let operations = HistogramVec::new(
            HistogramOpts::new(
                "lockwarden_zookeeper_request_duration_seconds",
                "Time ZooKeeper took to answer a request, by operation (for a record write that waited to share a multi, from when it was ready to go); requests that got no answer within their deadline are counted in lockwarden_store_errors_total{kind=\"timeout\"} instead.",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
            &["operation"],
        );
        let errors = IntCounterVec::new(
            Opts::new(
                "lockwarden_store_errors_total",
                "Store calls that failed (the caller got 503 or retried), by kind.",
            ),
            &["kind"],
        );
        let session = IntGaugeVec::new(
            Opts::new(
                "lockwarden_zookeeper_session_state",
                "The state of this instance's ZooKeeper session: 1 for the current state, 0 for the others.",
            ),
            &["state"],
        );
        let stand_in = IntGaugeVec::new(
            Opts::new(
                "lockwarden_zookeeper_stand_in",
                "1 while a stand-in ZooKeeper session serves this instance's reads and record writes because its primary session is disconnected, else 0.",
            ),
            &[],
        );
        let record_writes = IntCounterVec::new(
            Opts::new(
                "lockwarden_zookeeper_record_writes_total",
                "Record writes sent to ZooKeeper, by whether they went in a multi of their own (alone) or shared one with other writes of this instance because enough were already in flight (shared; see --zk-writes-in-flight). A write sent again after a shared multi failed is counted again.",
            ),
            &["how"],
        );
        let writes_waiting = IntGaugeVec::new(
            Opts::new(
                "lockwarden_zookeeper_record_writes_waiting",
                "Record writes waiting on this instance to go to ZooKeeper in a shared multi (see --zk-writes-in-flight).",
            ),
            &[],
        );
        let probes = IntCounterVec::new(
            Opts::new(
                "lockwarden_zookeeper_session_probes_total",
                "Probes (a write that changes nothing) of this instance's connected ZooKeeper session after a request timed out, by outcome: answered within a session timeout (the session is kept), abandoned (no answer while the session stayed connected: its server answers no write, so the session was given up and replaced), or disconnected (no answer, and the connection was lost meanwhile).",
            ),
            &["outcome"],
        );
        let contradictions = IntCounterVec::new(
            Opts::new(
                "lockwarden_zookeeper_contradicting_copies_total",
                "Primary ZooKeeper sessions given up because their server's copy of a record contradicted the leader's: twice running, a read on the session showed the record in the very state the leader had just refused a write on (see \"Sessions\" in docs/api.md).",
            ),
            &[],
        );
        Families {
            contradictions: register(registry, contradictions),
            probes: register(registry, probes),
            record_writes: register(registry, record_writes),
            writes_waiting: register(registry, writes_waiting),
            operations: register(registry, operations),
            errors: register(registry, errors),
            session: register(registry, session),
            stand_in: register(registry, stand_in),
        }
    }

    /// Makes every series, starting in `connecting`.
    pub(super) fn series(&self) -> ZkMetrics {
        let metrics = ZkMetrics {
            operations: Labeled::of(&self.operations),
            errors: Labeled::of(&self.errors),
            session: Labeled::of(&self.session),
            stand_in: self.stand_in.with_label_values::<&str>(&[]),
            record_writes: Labeled::of(&self.record_writes),
            writes_waiting: self.writes_waiting.with_label_values::<&str>(&[]),
            probes: Labeled::of(&self.probes),
            contradictions: self.contradictions.with_label_values::<&str>(&[]),
        };
        metrics.session(SessionState::Connecting);
        metrics
    }
}

/// What the ZooKeeper store records; cheap to clone (every series is shared).
#[derive(Clone)]
pub struct ZkMetrics {
    operations: Labeled<prometheus::Histogram, ZkOp>,
    errors: Labeled<prometheus::IntCounter, StoreErrorKind>,
    session: Labeled<prometheus::IntGauge, SessionState>,
    stand_in: prometheus::IntGauge,
    record_writes: Labeled<prometheus::IntCounter, WriteSharing>,
    writes_waiting: prometheus::IntGauge,
    probes: Labeled<prometheus::IntCounter, ProbeOutcome>,
    contradictions: prometheus::IntCounter,
}

impl ZkMetrics {
    /// Runs a request, and records how long it took once it is answered (with success or
    /// an error). A request dropped unanswered (its deadline passed) records nothing: its
    /// time would say only when the caller stopped waiting.
    pub async fn time<F: Future>(&self, op: ZkOp, request: F) -> F::Output {
        let started = Instant::now();
        let answer = request.await;
        self.operations
            .at(op)
            .observe(started.elapsed().as_secs_f64());
        answer
    }

    /// Whether a stand-in session serves (see `store::zk::session`).
    pub fn stand_in(&self, serving: bool) {
        self.stand_in.set(i64::from(serving));
    }

    /// Counts `writes` record writes sent in one `multi`, shared or alone.
    pub fn record_writes(&self, writes: usize, shared: bool) {
        let how = if shared {
            WriteSharing::Shared
        } else {
            WriteSharing::Alone
        };
        self.record_writes.at(how).inc_by(writes as u64);
    }

    /// How many record writes wait to share a `multi`.
    pub fn writes_waiting(&self, waiting: usize) {
        self.writes_waiting.set(waiting as i64);
    }

    /// Counts a probe of a session whose requests timed out (see `store::zk::session`).
    pub fn session_probed(&self, outcome: ProbeOutcome) {
        self.probes.at(outcome).inc();
    }

    /// Counts a session given up because its server's copy contradicted the leader's.
    pub fn contradicting_copy(&self) {
        self.contradictions.inc();
    }

    pub fn error(&self, kind: StoreErrorKind) {
        self.errors.at(kind).inc();
    }

    /// Marks `state` as the current one. (A scrape between the two steps may see no state
    /// or two for an instant; that is all a gauge per state can offer without a lock.)
    pub fn session(&self, state: SessionState) {
        for &other in SessionState::ALL {
            self.session.at(other).set(i64::from(other == state));
        }
    }
}
