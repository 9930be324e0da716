//! `lockwarden bench-relay`: the floor of a service on lockwarden's HTTP stack, for the bench.
//!
//! A bare HTTP server on the service's own stack (axum, hyper, the connection loop of
//! [`crate::http_server`], a runtime of the same shape) that turns the bench's acquire into
//! one ZooKeeper create and its release into one delete, through the same client crate as
//! the raw floor. It keeps no lock, lease, record, queue, metric or log: it is the raw floor
//! plus the HTTP hop between two processes on lockwarden's own stack, which lockwarden
//! cannot avoid (a leaner HTTP stack might pay less). So the bench can say how much of
//! lockwarden's gap to the raw floor is that hop (relay ÷ floor) and how much is lockwarden's
//! own work (lockwarden ÷ relay). In the parallel figure it is a reference, not a floor: it
//! never puts concurrent writes in one `multi`.
//!
//! It speaks just enough of the API for the bench's measuring client:
//! `POST /v1/locks/{name}/acquire` creates `/lockwarden-bench-relay/{name}` (400 bytes, like
//! the floor's znode) and answers `{"lease_id": name}`; `POST /v1/locks/{name}/release`
//! deletes it. It is for benchmarks on loopback only, not for use as a lock.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use bytes::Bytes;
use clap::Args;
use tokio::net::TcpListener;
use zookeeper_client as zk;

use crate::http_server::{self, ConnectionLimits};

/// Where the relay's znodes live.
const ROOT: &str = "/lockwarden-bench-relay";
/// A relay call that ZooKeeper does not answer in this time fails instead of hanging.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Clone, Debug, Args)]
pub struct RelayArgs {
    /// Address to listen on: a loopback address, since the relay has no access control.
    #[arg(long, default_value = "127.0.0.1:8081", value_parser = loopback_address)]
    pub listen: SocketAddr,
    /// The ZooKeeper to relay to (host:port).
    #[arg(long)]
    pub zk: String,
}

/// The relay's `--listen`: a socket address on loopback, refused before anything binds.
fn loopback_address(text: &str) -> Result<SocketAddr, String> {
    let address: SocketAddr = text
        .parse()
        .map_err(|e| format!("not a socket address: {e}"))?;
    if !address.ip().is_loopback() {
        return Err(format!(
            "{} is not a loopback address: the relay is for benchmarks on this machine",
            address.ip()
        ));
    }
    Ok(address)
}

/// Serves the relay on `--listen` until `shutdown` completes. It connects to ZooKeeper
/// before it listens, so that a caller who waits for the port finds a relay that can serve.
pub async fn serve(
    args: RelayArgs,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    let client = connect(&args.zk).await?;
    let listener = TcpListener::bind(args.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    serve_with(listener, client, shutdown).await;
    Ok(())
}

/// Serves the relay on `listener`, relaying to the ZooKeeper at `zk`, until `shutdown`.
pub async fn serve_on(
    listener: TcpListener,
    zk: &str,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    let client = connect(zk).await?;
    serve_with(listener, client, shutdown).await;
    Ok(())
}

/// A session to the ZooKeeper at `zk`, with the relay's parent node in place.
async fn connect(zk: &str) -> Result<zk::Client, String> {
    let client = zk::Client::connect(zk)
        .await
        .map_err(|e| format!("connecting to ZooKeeper at {zk}: {e}"))?;
    match client.create(ROOT, b"", &options()).await {
        Ok(_) | Err(zk::Error::NodeExists) => Ok(client),
        Err(e) => Err(format!("creating {ROOT}: {e}")),
    }
}

async fn serve_with(
    listener: TcpListener,
    client: zk::Client,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let app = Router::new()
        .route("/v1/locks/{name}/acquire", post(acquire))
        .route("/v1/locks/{name}/release", post(release))
        .with_state(client);
    let limits = ConnectionLimits {
        max_connections: 1024,
        read_timeout: Duration::from_secs(10),
    };
    http_server::run(listener, app, limits, None, shutdown).await;
}

fn options() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
}

/// The node of a name; `None` for a name that is not one plain path segment.
fn node(name: &str) -> Option<String> {
    let plain = !name.is_empty() && name.len() <= 200 && !name.contains(['/', '\0']);
    plain.then(|| format!("{ROOT}/{name}"))
}

/// A JSON answer, as the service gives one.
fn json(body: String) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

// The body is read (and ignored) so that the connection stays usable for the next request.
async fn acquire(State(client): State<zk::Client>, Path(name): Path<String>, _: Bytes) -> Response {
    let Some(path) = node(&name) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let created = client.create(&path, &[b'x'; 400], &options());
    match tokio::time::timeout(CALL_TIMEOUT, created).await {
        Ok(Ok(_)) => json(serde_json::json!({ "lease_id": name }).to_string()),
        Ok(Err(zk::Error::NodeExists)) => StatusCode::CONFLICT.into_response(),
        _ => StatusCode::SERVICE_UNAVAILABLE.into_response(),
    }
}

async fn release(State(client): State<zk::Client>, Path(name): Path<String>, _: Bytes) -> Response {
    let Some(path) = node(&name) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    match tokio::time::timeout(CALL_TIMEOUT, client.delete(&path, None)).await {
        Ok(Ok(())) => json("{}".into()),
        Ok(Err(zk::Error::NoNode)) => StatusCode::NOT_FOUND.into_response(),
        _ => StatusCode::SERVICE_UNAVAILABLE.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::loopback_address;

    #[test]
    fn the_relay_listens_on_loopback_only() {
        assert!(loopback_address("127.0.0.1:8081").is_ok());
        assert!(loopback_address("127.3.2.1:0").is_ok());
        assert!(loopback_address("[::1]:8081").is_ok());
        for refused in ["0.0.0.0:8081", "[::]:8081", "10.1.2.3:8081", "192.0.2.7:80"] {
            let error = loopback_address(refused).expect_err(refused);
            assert!(
                error.contains("not a loopback address"),
                "{refused}: {error}"
            );
        }
        assert!(
            loopback_address("localhost:8081").is_err(),
            "an address, not a name"
        );
    }
}
