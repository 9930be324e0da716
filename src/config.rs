//! The command line: `lockwarden serve [flags]`, each flag also read from `LOCKWARDEN_<FLAG>`,
//! beside `bench` and the client commands (`lock`, `status`, …; their flags are in `cli`).
//! `ServeArgs::check` (in `config_check.rs`) checks what clap cannot.

use std::net::SocketAddr;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "lockwarden",
    version,
    about = "Named, leased, prioritised locks over HTTP, stored in ZooKeeper",
    after_help = "The client commands find the service at LOCKWARDEN_ADDR (default \
                  http://127.0.0.1:8080) with the token LOCKWARDEN_TOKEN. \
                  `lockwarden lock --help` lists the exit codes."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

// (Parsed once per process: the size of its largest variant costs nothing.)
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the lock service.
    Serve(ServeArgs),
    /// Benchmark a running lockwarden (and the raw ZooKeeper floor beside it).
    Bench(crate::bench::BenchArgs),
    /// For `scripts/bench` only: a bare HTTP relay to ZooKeeper (one create per acquire,
    /// one delete per release), the floor of a service on lockwarden's own HTTP stack.
    #[command(hide = true)]
    BenchRelay(crate::bench::relay::RelayArgs),
    #[command(flatten)]
    Client(crate::cli::ClientCommand),
}

#[derive(Clone, Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "LOCKWARDEN_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Serve HTTPS with this certificate chain (a PEM file, the server's certificate first);
    /// needs --tls-key. Without both, the service speaks plain HTTP.
    #[arg(
        long,
        env = "LOCKWARDEN_TLS_CERT",
        value_name = "PATH",
        requires = "tls_key"
    )]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The private key of --tls-cert (a PEM file: PKCS#8, PKCS#1 or SEC1).
    #[arg(
        long,
        env = "LOCKWARDEN_TLS_KEY",
        value_name = "PATH",
        requires = "tls_cert"
    )]
    pub tls_key: Option<std::path::PathBuf>,
    /// ZooKeeper connection string (host:port,...). Without it, locks live in memory.
    #[arg(long, env = "LOCKWARDEN_ZK")]
    pub zk: Option<String>,
    /// Authenticate to ZooKeeper as `digest:USER:PASSWORD` and create every znode readable
    /// and writable by that identity alone. Without it, znodes get ZooKeeper's open ACL
    /// (world:anyone): anyone who can reach ZooKeeper can read every lock and change or
    /// delete any of them. ACLs are not inherited, so znodes created before this flag was
    /// set keep their open ACL. Every instance needs the same credentials.
    #[arg(
        long,
        env = "LOCKWARDEN_ZK_AUTH",
        value_name = "digest:USER:PASSWORD",
        hide_env_values = true
    )]
    pub zk_auth: Option<crate::store::zk::access::DigestAuth>,
    /// The secret under which lease and request ids are sealed (HMAC-SHA-256) before they
    /// are stored, so that reading ZooKeeper does not let anyone act as a holder. Every
    /// instance needs the same one; changing it ends every live lease. Without it, a
    /// built-in key is used: lease ids (random) still cannot be recovered from their seals,
    /// but a guessable request_id can be checked against its seal and its lease id derived.
    #[arg(long, env = "LOCKWARDEN_RECORD_SECRET", hide_env_values = true)]
    pub record_secret: Option<String>,
    /// The znode under which lock records live.
    #[arg(
        long,
        env = "LOCKWARDEN_LOCK_ROOT",
        default_value = "/lockwarden/locks"
    )]
    pub lock_root: String,
    /// The znode under which queues and other state live.
    #[arg(
        long,
        env = "LOCKWARDEN_STATE_ROOT",
        default_value = "/lockwarden/state"
    )]
    pub state_root: String,
    /// The znode under which elections live: their records in `records`, their queues in
    /// `state`. It may not hold, or lie under, the lock and state roots.
    #[arg(
        long,
        env = "LOCKWARDEN_ELECTION_ROOT",
        default_value = "/lockwarden/elections"
    )]
    pub election_root: String,
    /// The znode under which semaphores live: their records in `records`, their queues in
    /// `state`. It may not hold, or lie under, the other roots.
    #[arg(
        long,
        env = "LOCKWARDEN_SEMAPHORE_ROOT",
        default_value = "/lockwarden/semaphores"
    )]
    pub semaphore_root: String,
    /// A token that /v1 calls must present as `Authorization: Bearer <token>` (repeatable;
    /// the variable takes a comma-separated list).
    #[arg(
        long = "api-token",
        env = "LOCKWARDEN_API_TOKEN",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub api_tokens: Vec<String>,
    /// A TOML file of API tokens, read at start and again on SIGHUP (a bad file then is
    /// logged and the tokens before it kept). Each `[[token]]` has `secret = "..."` or
    /// `sha256 = "..."` (the token's SHA-256 in hex), and optionally `name = "..."` (the audit
    /// trail's actor.token), `prefixes = ["jobs/", ...]` (the names it may use, in whole name
    /// parts: jobs/ covers jobs and jobs/x, not jobs2) and `max_priority = N`; a call beyond
    /// them gets 403 forbidden. With it, every /v1 call needs a token; --api-token tokens stay
    /// valid, unlimited. The admin token cannot be in it.
    #[arg(long, env = "LOCKWARDEN_TOKEN_FILE", value_name = "PATH")]
    pub token_file: Option<std::path::PathBuf>,
    /// The admin token: needed for priority 2147483647 and force release.
    #[arg(long, env = "LOCKWARDEN_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// A token that /metrics then needs as `Authorization: Bearer <token>`; without it,
    /// /metrics is open.
    #[arg(long, env = "LOCKWARDEN_METRICS_TOKEN", hide_env_values = true)]
    pub metrics_token: Option<String>,
    /// Append the audit trail (admin actions and preemption takeovers, one JSON object per
    /// line) to this file; without it, the trail goes to stderr (target lockwarden::audit).
    #[arg(long, env = "LOCKWARDEN_AUDIT_LOG")]
    pub audit_log: Option<std::path::PathBuf>,
    /// The secret that signs webhooks, as `whsec_<base64>`.
    #[arg(long, env = "LOCKWARDEN_WEBHOOK_SECRET", hide_env_values = true)]
    pub webhook_secret: Option<String>,
    /// Allow webhook targets on loopback, private, link-local and other addresses that are not
    /// globally reachable.
    #[arg(long, env = "LOCKWARDEN_WEBHOOK_ALLOW_PRIVATE")]
    pub webhook_allow_private: bool,
    /// The longest lease a caller may ask for.
    #[arg(long, env = "LOCKWARDEN_MAX_LEASE_MS", default_value_t = crate::model::DEFAULT_MAX_LEASE_MS)]
    pub max_lease_ms: u64,
    /// The longest a caller may ask to wait.
    #[arg(long, env = "LOCKWARDEN_MAX_WAITING_MS", default_value_t = crate::model::DEFAULT_MAX_WAITING_MS)]
    pub max_waiting_ms: u64,
    /// How long one request may spend on the store before it answers 503.
    #[arg(long, env = "LOCKWARDEN_STORE_TIMEOUT_MS", default_value_t = 2_000)]
    pub store_timeout_ms: u64,
    /// How long a released lock's free record waits before each of the two phases of its
    /// deletion: first it is fenced (unless reused meanwhile), then deleted (unless touched
    /// since). Must exceed 2 x --store-timeout-ms + 1.5 x --zk-session-timeout-ms, the
    /// longest a write may take to land: ZooKeeper restarts a node's version when it is
    /// created again, so a write planned on the deleted record must not land on a new one.
    #[arg(long, env = "LOCKWARDEN_GC_DELAY_MS", default_value_t = 15_000)]
    pub gc_delay_ms: u64,
    /// How often each instance looks through every lock record for free records that no
    /// instance has scheduled for deletion (one whose instance crashed, say). It also does
    /// so once at start.
    #[arg(
        long,
        env = "LOCKWARDEN_GC_SWEEP_INTERVAL_MS",
        default_value_t = 600_000
    )]
    pub gc_sweep_interval_ms: u64,
    /// The most that the wall clocks of two lockwarden instances may disagree. An expired
    /// lease is taken over only this long after its expiry, so that no instance hands a lock
    /// on while another (whose clock is behind) still says its holder holds it. Keep the
    /// hosts' clocks synchronised (NTP) well within it.
    #[arg(long, env = "LOCKWARDEN_MAX_CLOCK_SKEW_MS", default_value_t = 1_000)]
    pub max_clock_skew_ms: u64,
    /// The most callers that may wait in one lock's queue (an SRE override always may).
    /// Beyond it, an acquire that would wait gets `429 too_many_waiters`. At most 10000, so
    /// that listing a queue stays far below ZooKeeper's 1 MB packet limit.
    #[arg(long, env = "LOCKWARDEN_MAX_WAITERS_PER_LOCK", default_value_t = 1_000)]
    pub max_waiters_per_lock: usize,
    /// The most acquire calls that may wait in queues on this instance at once; beyond it,
    /// `429 too_many_waiters`.
    #[arg(long, env = "LOCKWARDEN_MAX_WAITING_CALLS", default_value_t = 2_000)]
    pub max_waiting_calls: usize,
    /// Group commit: on a lock that this instance handed over within this many
    /// milliseconds, a caller joining its queue waits up to as long for the next hand-off
    /// here, and joins in that hand-off's own ZooKeeper write, saving a write of its own.
    /// 0 turns it off: every caller joins at once, in a write of its own. At most 1000.
    #[arg(long, env = "LOCKWARDEN_JOIN_WINDOW_MS", default_value_t = 10)]
    pub join_window_ms: u64,
    /// The head's grace: a waiter at the head of a queue whose holder got its grant (or last
    /// renewed) on this instance waits up to this many milliseconds for that holder's
    /// release here, which reaches it in-process, before it sets its ZooKeeper watch on the
    /// record. A release made elsewhere meanwhile reaches it when the grace ends; after one
    /// such miss the grace is off for that lock on this instance for 30 s. 0 turns it off.
    /// At most 10000.
    #[arg(long, env = "LOCKWARDEN_HEAD_GRACE_MS", default_value_t = 5)]
    pub head_grace_ms: u64,
    /// Write coalescing (shared multis): once this many record writes of this instance wait
    /// for ZooKeeper, further ones wait here and go out together, in one ZooKeeper `multi`,
    /// when one of them is answered. A write that finds fewer in flight goes out at once,
    /// alone. 0 turns it off. At most 1024.
    #[arg(long, env = "LOCKWARDEN_ZK_WRITES_IN_FLIGHT", default_value_t = 4)]
    pub zk_writes_in_flight: usize,
    /// Performance hints to turn off, comma-separated: record-cache, remembered-queue,
    /// in-process, group-commit, head-grace, shared-multis, one-writer, or all. Every answer stays the
    /// same; only the store reads and writes per call and the latency change.
    #[arg(long, env = "LOCKWARDEN_HINTS_OFF", value_delimiter = ',', value_enum)]
    pub hints_off: Vec<crate::service::Hint>,
    /// The most HTTP connections served at once; further clients wait in the listen backlog.
    #[arg(long, env = "LOCKWARDEN_MAX_CONNECTIONS", default_value_t = 4_096)]
    pub max_connections: usize,
    /// How long a client may take to send a request's headers, and its body, before the
    /// connection is closed (headers) or answered `408 request_timeout` (body). Over TLS,
    /// the handshake must finish within it too.
    #[arg(
        long,
        env = "LOCKWARDEN_REQUEST_READ_TIMEOUT_MS",
        default_value_t = 10_000
    )]
    pub request_read_timeout_ms: u64,
    /// How often an event stream sends a heartbeat comment.
    #[arg(long, env = "LOCKWARDEN_EVENT_HEARTBEAT_MS", default_value_t = 15_000)]
    pub event_heartbeat_ms: u64,
    /// The ZooKeeper session timeout.
    #[arg(
        long,
        env = "LOCKWARDEN_ZK_SESSION_TIMEOUT_MS",
        default_value_t = 6_000
    )]
    pub zk_session_timeout_ms: u64,
    /// Threads that serve requests (and the ZooKeeper client's socket, which is on the same
    /// runtime). The default is one less than the CPUs (at least one), which leaves a CPU to
    /// what usually shares the machine (ZooKeeper, a sidecar), at no cost in throughput
    /// where ZooKeeper shares the machine.
    #[arg(long, env = "LOCKWARDEN_WORKER_THREADS", value_parser = clap::value_parser!(u16).range(1..))]
    pub worker_threads: Option<u16>,
}

impl ServeArgs {
    /// The number of request threads to run.
    pub fn request_threads(&self) -> usize {
        match self.worker_threads {
            Some(n) => usize::from(n),
            None => default_request_threads(),
        }
    }
}

/// The request threads when `--worker-threads` is not given: one less than the CPUs, at
/// least one.
pub fn default_request_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get().saturating_sub(1))
        .max(1)
}

/// The cap on `--max-waiters-per-lock`. A queue node's name is about 55 bytes, so a listing
/// of this many (plus callers about to leave) stays far below ZooKeeper's 1 MB
/// `jute.maxbuffer`, past which every read of the queue would fail.
pub const MAX_WAITERS_PER_LOCK: usize = 10_000;

impl ServeArgs {
    /// Defaults for everything, as `lockwarden serve` with no flags would run.
    pub fn defaults() -> Self {
        Cli::try_parse_from(["lockwarden", "serve"])
            .ok()
            .and_then(|cli| match cli.command {
                Command::Serve(args) => Some(args),
                _ => None,
            })
            .expect("the defaults parse")
    }
}

#[path = "config_check.rs"]
mod check;

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
