//! The background work behind a `LockGuard`: renewing the lease, following the lock's
//! event stream, and judging from each view of the lock (a renewal answer or an event)
//! whether the lease is still ours and whether a cleanup was asked for.

use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::call::backoff;
use crate::client::Client;
use crate::events::Watch;
use crate::guard::{CleanupRequest, LossReason};
use crate::kind::Kind;
use crate::types::{FencingToken, LeaseId, LockInfo, LockState};

/// The longest one renewal call may take before it counts as lost and is sent again.
const RENEW_CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// What the guard and its tasks share: the grant's token and the two signals, each
/// set once.
pub(crate) struct Shared {
    token: FencingToken,
    pub lost: watch::Sender<Option<LossReason>>,
    pub cleanup: watch::Sender<Option<CleanupRequest>>,
}

impl Shared {
    pub fn new(token: FencingToken) -> Shared {
        Shared {
            token,
            lost: watch::Sender::new(None),
            cleanup: watch::Sender::new(None),
        }
    }

    pub fn lose(&self, reason: LossReason) {
        self.lost.send_if_modified(|lost| {
            if lost.is_some() {
                return false;
            }
            *lost = Some(reason);
            true
        });
    }

    pub fn is_lost(&self) -> bool {
        self.lost.borrow().is_some()
    }

    /// Judges one view of the lock; `event` names the event type it came with.
    pub fn judge(&self, lock: &LockInfo, event: Option<&str>) {
        if !lock.held_with(self.token) {
            self.lose(LossReason::Superseded {
                event: event.map(str::to_owned),
                holder_token: lock.fencing_token,
            });
            return;
        }
        if let Some(requestor) = &lock.requestor {
            self.cleanup.send_if_modified(|seen| {
                if seen.is_some() {
                    return false;
                }
                *seen = Some(CleanupRequest::new(requestor.clone()));
                true
            });
        }
    }
}

/// How long from `sent` a renewal answer lets us count on the lease: its `remaining_ms`
/// was computed after we sent it, so this errs early. Trimmed a little for clocks that
/// run at slightly different rates.
fn valid_until(sent: Instant, lock: &LockInfo, fallback: Duration) -> Instant {
    let remaining = lock.remaining_ms.map_or(fallback, Duration::from_millis);
    sent + remaining.saturating_sub(remaining / 50)
}

/// Renews every `every` until stopped (the task is aborted) or the lease is lost.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn renew(
    kind: Kind,
    client: Client,
    name: String,
    lease_id: LeaseId,
    every: Duration,
    mut valid_until_at: Instant,
    renew_now: bool,
    shared: std::sync::Arc<Shared>,
) {
    let path = kind.path(&name, "renew");
    let body = serde_json::json!({ "lease_id": lease_id });
    let mut next = if renew_now {
        Instant::now()
    } else {
        Instant::now() + every
    };
    loop {
        tokio::time::sleep_until(next.into()).await;
        if shared.is_lost() {
            return;
        }
        let mut attempt = 0;
        loop {
            let now = Instant::now();
            if now >= valid_until_at {
                shared.lose(LossReason::LeaseRanOut);
                return;
            }
            // A call that hangs (its instance lost its ZooKeeper server, say) is given up
            // after one renewal interval and sent again, rather than allowed to eat the
            // rest of the lease.
            let timeout = (valid_until_at - now).min(every.min(RENEW_CALL_TIMEOUT));
            let outcome = client
                .call_once(reqwest::Method::POST, &path, Some(&body), timeout)
                .await;
            let retry_after = match outcome {
                Ok(answer) if answer.status == 200 => {
                    match kind.view(&answer.body, shared.token) {
                        Some(lock) => {
                            valid_until_at = valid_until(now, &lock, every);
                            shared.judge(&lock, None);
                        }
                        // Renewed, though we cannot read the lock: count from the send.
                        None => valid_until_at = now + every,
                    }
                    if shared.is_lost() {
                        return;
                    }
                    next = now + every;
                    break;
                }
                Ok(answer) if !answer.is_transient() => {
                    let code = answer.into_error().code().unwrap_or("refused").to_owned();
                    shared.lose(LossReason::RenewalRefused { code });
                    return;
                }
                Ok(answer) => answer.retry_after,
                Err(_) => None,
            };
            // Never wait longer than a quarter of the renewal interval: a `Retry-After` of a
            // second is a hint for new work, not for a lease that may have less left.
            let pause = backoff(attempt, retry_after)
                .min(every / 4)
                .min(valid_until_at - Instant::now().min(valid_until_at));
            tokio::time::sleep(pause).await;
            attempt += 1;
        }
    }
}

/// Follows the lock's event stream and judges each event. A service without event
/// streams (404) or any other lasting refusal leaves the renewal answers as the only
/// source, which is enough, only slower.
pub(crate) async fn watch_events(kind: Kind, mut watch: Watch, shared: std::sync::Arc<Shared>) {
    loop {
        let event = match watch.next().await {
            Ok(event) => event,
            Err(_) => return,
        };
        let Some(lock) = &kind.view_of_event(&event, shared.token) else {
            continue;
        };
        // An event from before our grant (a zxid below our token) says nothing about it;
        // nor does a snapshot that old (an instance whose view lags behind the grant).
        if event.id.is_some_and(|id| id < shared_token(&shared)) {
            continue;
        }
        if lock.state == LockState::Unknown {
            continue;
        }
        shared.judge(lock, Some(&event.kind));
        if shared.is_lost() {
            return;
        }
    }
}

fn shared_token(shared: &Shared) -> u64 {
    shared.token.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Requestor;

    fn lock(state: LockState, token: u64, requestor: bool) -> LockInfo {
        let mut info: LockInfo = serde_json::from_str(r#"{"name":"a","state":"held"}"#).unwrap();
        info.state = state;
        info.fencing_token = Some(FencingToken(token));
        info.requestor = requestor.then(|| Requestor {
            owner: "boss".into(),
            priority: 5,
            waiting_ms: Some(1000),
            forceful: false,
            requested_at: None,
            cleanup_deadline: None,
        });
        info
    }

    #[test]
    fn our_token_held_is_kept_and_a_requestor_asks_for_cleanup() {
        let shared = Shared::new(FencingToken(7));
        shared.judge(&lock(LockState::Held, 7, false), None);
        assert!(!shared.is_lost());
        assert!(shared.cleanup.borrow().is_none());
        shared.judge(&lock(LockState::Held, 7, true), Some("cleanup_requested"));
        assert!(!shared.is_lost());
        assert_eq!(
            shared.cleanup.borrow().as_ref().unwrap().requestor.owner,
            "boss"
        );
    }

    #[test]
    fn another_token_or_a_free_lock_is_a_loss_and_the_first_reason_stays() {
        let shared = Shared::new(FencingToken(7));
        shared.judge(&lock(LockState::Held, 9, false), Some("handed_off"));
        shared.judge(&lock(LockState::Free, 7, false), Some("released"));
        assert_eq!(
            *shared.lost.borrow(),
            Some(LossReason::Superseded {
                event: Some("handed_off".into()),
                holder_token: Some(FencingToken(9))
            })
        );
        let shared = Shared::new(FencingToken(7));
        shared.judge(&lock(LockState::Expired, 7, false), None);
        assert!(shared.is_lost());
    }
}
