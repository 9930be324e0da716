//! The start-up warnings: which ways a `serve` configuration leaves the service open, judged
//! from its flags alone, each said with the flag that closes it. `server::serve` logs each
//! one as a warning line under the target `lockwarden::startup`.

use std::fmt;
use std::net::SocketAddr;

use crate::config::ServeArgs;

/// The tracing target of the start-up warnings.
pub const TARGET: &str = "lockwarden::startup";

/// One way a configuration leaves the service open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opening {
    /// `--listen` on an address that is not loopback without `--tls-cert`: plain HTTP
    /// reaches the network.
    PlainHttp(SocketAddr),
    /// No `--api-token` nor `--token-file` while the listen address is not loopback or the
    /// locks live in ZooKeeper: every `/v1` call is served without a token.
    NoApiToken,
    /// `--zk` without `--zk-auth`: znodes get ZooKeeper's open ACL.
    OpenZnodes,
    /// `--zk` without `--record-secret`: seals in ZooKeeper are made under the built-in key.
    BuiltInRecordSecret,
}

/// Every way `args` leaves the service open, in a fixed order; none for a closed
/// configuration (nor for the defaults: in memory, on loopback).
pub fn openings(args: &ServeArgs) -> Vec<Opening> {
    let beyond_this_host = !is_loopback(args.listen);
    let on_zookeeper = args.zk.is_some();
    let mut found = Vec::new();
    if beyond_this_host && args.tls_cert.is_none() {
        found.push(Opening::PlainHttp(args.listen));
    }
    let no_token = args.api_tokens.is_empty() && args.token_file.is_none();
    if no_token && (beyond_this_host || on_zookeeper) {
        found.push(Opening::NoApiToken);
    }
    if on_zookeeper && args.zk_auth.is_none() {
        found.push(Opening::OpenZnodes);
    }
    if on_zookeeper && args.record_secret.is_none() {
        found.push(Opening::BuiltInRecordSecret);
    }
    found
}

/// The warnings to log at start-up, one line each.
pub fn warnings(args: &ServeArgs) -> Vec<String> {
    openings(args).iter().map(Opening::to_string).collect()
}

/// Whether `addr` is a loopback address (an IPv4-mapped one included). The unspecified
/// address (`0.0.0.0`, `::`) listens on every interface, so it is not.
fn is_loopback(addr: SocketAddr) -> bool {
    addr.ip().to_canonical().is_loopback()
}

impl fmt::Display for Opening {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Opening::PlainHttp(addr) => write!(
                f,
                "--listen {addr} is not a loopback address and lockwarden speaks plain HTTP: \
                 requests, tokens included, cross the network unencrypted; serve HTTPS with \
                 --tls-cert and --tls-key (LOCKWARDEN_TLS_CERT, LOCKWARDEN_TLS_KEY), or put \
                 it behind a TLS-terminating proxy and --listen on 127.0.0.1"
            ),
            Opening::NoApiToken => f.write_str(
                "no --api-token nor --token-file: every /v1 call is served without a token, so anyone who can \
                 reach the service can take, renew and release any lock; set --api-token \
                 (LOCKWARDEN_API_TOKEN) or --token-file (LOCKWARDEN_TOKEN_FILE)",
            ),
            Opening::OpenZnodes => f.write_str(
                "no --zk-auth: znodes are created with ZooKeeper's open ACL (world:anyone), so \
                 anyone who can reach ZooKeeper can read, change or delete any lock; set \
                 --zk-auth digest:USER:PASSWORD (LOCKWARDEN_ZK_AUTH)",
            ),
            Opening::BuiltInRecordSecret => f.write_str(
                "no --record-secret: lease and request ids are sealed in ZooKeeper under the \
                 built-in key, so whoever reads ZooKeeper can check a guessed request_id \
                 against its seal and derive its lease id; set --record-secret \
                 (LOCKWARDEN_RECORD_SECRET), the same on every instance",
            ),
        }
    }
}

#[cfg(test)]
#[path = "startup_tests.rs"]
mod tests;
