//! Callers that wait in a lock's queue, for tests that hand a lock along a line of them.

use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

use super::Service;

/// How long a queued caller may take to be granted the lock before the test fails.
const GRANT_WITHIN: Duration = Duration::from_secs(20);

/// Starts an acquire by `who` that waits up to 30 s for `lock` and holds it for a minute.
pub fn queued(svc: &Arc<Service>, lock: &str, who: &str) -> JoinHandle<(StatusCode, Value)> {
    let svc = svc.clone();
    let lock = lock.to_owned();
    let body = json!({"owner": who, "lease_ms": 60_000, "waiting_ms": 30_000});
    tokio::spawn(async move { svc.acquire(&lock, body).await })
}

/// The grant a queued caller got; fails the test if it got none, or not as `who`.
pub async fn granted(task: JoinHandle<(StatusCode, Value)>, who: &str) -> Value {
    let (status, body) = tokio::time::timeout(GRANT_WITHIN, task)
        .await
        .unwrap_or_else(|_| panic!("{who} was never granted the lock"))
        .unwrap();
    assert_eq!(status, StatusCode::OK, "{who}: {body}");
    assert_eq!(body["lock"]["owner"], who);
    body
}
