//! Wires configuration, store, service and router together, and runs the HTTP server.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;
use tracing::{info, warn};

use crate::api::{self, auth::Auth, dto::Limits, AppState, WebhookPolicy};
use crate::audit::AuditLog;
use crate::config::ServeArgs;
use crate::http_server::{self, ConnectionLimits};
use crate::metrics::Metrics;
use crate::seal::Sealer;
use crate::service::events::{EventSink, NoEvents};
use crate::service::{Hint, Hints, LockService, Timing};
use crate::startup;
use crate::store::zk::{access::ZkAccess, ZkConfig, ZkStore};
use crate::store::{memory::MemoryStore, LockStore};
use crate::tls;
use crate::webhook::{sign::Secret, Webhooks};

/// Builds the application. Must run inside a tokio runtime (the ZooKeeper session starts).
pub fn app(args: &ServeArgs) -> Result<Router, String> {
    build(args).map(|(router, _)| router)
}

/// The application, and its credentials (which a reload of the token file changes).
fn build(args: &ServeArgs) -> Result<(Router, Auth), String> {
    args.check()?;
    let sealer = Sealer::new(args.record_secret.as_deref());
    // Each instance has its own metrics (tests run several in one process).
    let metrics = Arc::new(Metrics::new());
    let (store, election_store, semaphore_store) = stores(args, &sealer, &metrics);
    // Elections keep their own records and queues, under their own root, and their own
    // service figures (on /metrics under `resource="election"`, as semaphores' are under
    // `resource="semaphore"`); their ZooKeeper requests are the instance's.
    let election_metrics = Arc::new(Metrics::new());
    let events: Arc<dyn EventSink> = match &args.webhook_secret {
        Some(secret) => Arc::new(Webhooks::start(
            Secret::parse(secret)?,
            args.webhook_allow_private,
            metrics.clone(),
        )),
        None => Arc::new(NoEvents),
    };
    // A hint turned off by `--hints-off` counts as its duration set to 0.
    let hinted = |hint: Hint, ms: u64| if hint.on(&args.hints_off) { ms } else { 0 };
    let timing = Timing {
        store_timeout: Duration::from_millis(args.store_timeout_ms),
        gc_delay: Duration::from_millis(args.gc_delay_ms),
        gc_sweep_every: Duration::from_millis(args.gc_sweep_interval_ms),
        max_clock_skew_ms: args.max_clock_skew_ms,
        max_waiters_per_lock: args.max_waiters_per_lock,
        max_waiting_calls: args.max_waiting_calls,
        join_window: Duration::from_millis(hinted(Hint::GroupCommit, args.join_window_ms)),
        head_grace: Duration::from_millis(hinted(Hint::HeadGrace, args.head_grace_ms)),
        hints: Hints::without(&args.hints_off),
    };
    let audit = Arc::new(AuditLog::open(args.audit_log.as_deref())?);
    let elections = Arc::new(
        LockService::new(election_store, timing, events.clone(), election_metrics)
            .with_audit(audit.clone())
            .for_elections(),
    );
    let semaphores = Arc::new(
        LockService::new(
            semaphore_store,
            timing,
            events.clone(),
            Arc::new(Metrics::new()),
        )
        .with_audit(audit.clone())
        .for_semaphores(),
    );
    let service = Arc::new(LockService::new(store, timing, events, metrics).with_audit(audit));
    let mut auth = Auth::new(&args.api_tokens, args.admin_token.as_deref())
        .with_metrics_token(args.metrics_token.as_deref());
    if let Some(path) = &args.token_file {
        auth = auth.with_token_file(path)?;
    }
    let router = api::router(AppState {
        service,
        elections,
        semaphores,
        auth: auth.clone(),
        limits: Limits {
            max_lease_ms: args.max_lease_ms,
            max_waiting_ms: args.max_waiting_ms,
        },
        webhooks: WebhookPolicy {
            enabled: args.webhook_secret.is_some(),
            allow_private: args.webhook_allow_private,
        },
        sealer,
        event_heartbeat: Duration::from_millis(args.event_heartbeat_ms),
    });
    Ok((router, auth))
}

/// The stores of locks, of elections and of semaphores: in ZooKeeper, under their roots on
/// one session, or each in memory.
fn stores(
    args: &ServeArgs,
    sealer: &Sealer,
    metrics: &Metrics,
) -> (Arc<dyn LockStore>, Arc<dyn LockStore>, Arc<dyn LockStore>) {
    let Some(connect) = &args.zk else {
        return (
            Arc::new(MemoryStore::new()),
            Arc::new(MemoryStore::new()),
            Arc::new(MemoryStore::new()),
        );
    };
    let at = |lock_root: String, state_root: String| ZkConfig {
        connect: connect.clone(),
        lock_root,
        state_root,
        session_timeout: Duration::from_millis(args.zk_session_timeout_ms),
        access: ZkAccess::from_flag(args.zk_auth.clone()),
        sealer: sealer.clone(),
        metrics: metrics.zookeeper(),
        writes_in_flight: if Hint::SharedMultis.on(&args.hints_off) {
            args.zk_writes_in_flight
        } else {
            0
        },
    };
    let locks = ZkStore::new(at(args.lock_root.clone(), args.state_root.clone()));
    let elections = locks.beside(at(
        format!("{}/records", args.election_root),
        format!("{}/state", args.election_root),
    ));
    let semaphores = locks.beside(at(
        format!("{}/records", args.semaphore_root),
        format!("{}/state", args.semaphore_root),
    ));
    (Arc::new(locks), Arc::new(elections), Arc::new(semaphores))
}

/// Serves on `listener` until `shutdown` completes. Reads no signal: a token file is read
/// once (the process's `serve` also reads it again on SIGHUP).
pub async fn serve_on(
    listener: TcpListener,
    args: ServeArgs,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    run(listener, args, shutdown, false).await
}

async fn run(
    listener: TcpListener,
    args: ServeArgs,
    shutdown: impl Future<Output = ()> + Send + 'static,
    reload_on_hangup: bool,
) -> Result<(), String> {
    // First the files: a bad certificate stops start-up before ZooKeeper is dialled.
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(tls::acceptor(cert, key)?),
        _ => None,
    };
    let (app, auth) = build(&args)?;
    if let Some((path, count)) = auth.token_file() {
        info!(path = %path.display(), tokens = count, "token file loaded");
    }
    // Always, so that a SIGHUP (a `systemctl reload`, say) never ends the process.
    if reload_on_hangup {
        reload_tokens_on_hangup(auth)?;
    }
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let store = args.zk.as_deref().unwrap_or("embedded in-memory store");
    let scheme = if tls.is_some() { "https" } else { "http" };
    info!(%addr, %scheme, %store, "lockwarden listening");
    let limits = ConnectionLimits {
        max_connections: args.max_connections,
        read_timeout: Duration::from_millis(args.request_read_timeout_ms),
    };
    http_server::run(listener, app, limits, tls, shutdown).await;
    Ok(())
}

/// Checks `args`, logs the start-up warnings ([`startup`]), and serves on `--listen` until
/// `shutdown` completes.
pub async fn serve(
    args: ServeArgs,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    args.check()?;
    for warning in startup::warnings(&args) {
        warn!(target: startup::TARGET, "{warning}");
    }
    let listener = TcpListener::bind(args.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    run(listener, args, shutdown, true).await
}

/// Reads the token file again on each SIGHUP: a good file replaces the tokens, a bad one is
/// logged and the tokens before it stay. Without a token file, a SIGHUP is logged and
/// ignored.
fn reload_tokens_on_hangup(auth: Auth) -> Result<(), String> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut hangups = signal(SignalKind::hangup())
            .map_err(|e| format!("cannot install a SIGHUP handler: {e}"))?;
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                let reading = auth.clone();
                let reloaded = tokio::task::spawn_blocking(move || reading.reload())
                    .await
                    .ok()
                    .flatten();
                let Some((path, count)) = auth.token_file() else {
                    info!("SIGHUP: no --token-file to read again");
                    continue;
                };
                match reloaded {
                    Some(Ok(_)) => {
                        info!(path = %path.display(), tokens = count, "token file reloaded")
                    }
                    Some(Err(error)) => tracing::error!(
                        tokens = count,
                        "{error}; the token file was not reloaded, its tokens before stay"
                    ),
                    None => {}
                }
            }
        });
    }
    #[cfg(not(unix))]
    let _ = auth;
    Ok(())
}
