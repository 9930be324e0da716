use super::*;
use crate::model::LockName;
use crate::record::LockRecord;

const READ_AT: UnixMillis = UnixMillis(1_700_000_000_000);

/// A `lock_held` refusal of a lock read at `READ_AT`, with the engine's answers.
fn lock_held(takeover_in_ms: Option<u64>, open: bool, waiters: u64) -> Response {
    let takeover_at = takeover_in_ms.map(|ms| READ_AT.plus(ms));
    let lock = LockSnapshot {
        name: LockName::parse("a/b").unwrap(),
        record: LockRecord::default(),
        read_at: READ_AT,
        takeover_at,
        margin_ms: 0,
        waiters,
    };
    let refusal = Refusal::LockHeld {
        retry_at: takeover_at.filter(|_| open),
    };
    let refused = ServiceError::Refused {
        refusal,
        lock: Box::new(lock),
    };
    ApiError::from(refused).on_acquire().into_response()
}

fn retry_after(response: &Response) -> Option<&str> {
    let value = response.headers().get(header::RETRY_AFTER)?;
    Some(value.to_str().unwrap())
}

async fn message(response: Response) -> String {
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["error"]["code"], "lock_held");
    body["error"]["message"].as_str().unwrap().to_owned()
}

#[test]
fn retry_after_is_the_seconds_until_takeover_rounded_up_and_at_least_one() {
    for (ms, secs) in [(0, "1"), (1, "1"), (1000, "1"), (1001, "2"), (4500, "5")] {
        assert_eq!(
            retry_after(&lock_held(Some(ms), true, 0)),
            Some(secs),
            "{ms}"
        );
    }
    assert_eq!(retry_after(&lock_held(Some(1500), false, 1)), None);
    assert_eq!(retry_after(&lock_held(None, false, 0)), None);
    let unavailable = ApiError::from(ServiceError::StoreUnavailable("x".into()));
    assert_eq!(retry_after(&unavailable.into_response()), Some("1"));
    let full = ServiceError::Refused {
        refusal: Refusal::TooManyWaiters,
        lock: Box::new(LockSnapshot {
            name: LockName::parse("a").unwrap(),
            record: LockRecord::default(),
            read_at: READ_AT,
            takeover_at: None,
            margin_ms: 0,
            waiters: 3,
        }),
    };
    let full = ApiError::from(full).on_acquire().into_response();
    assert_eq!(
        retry_after(&full),
        Some("1"),
        "a full queue keeps its Retry-After"
    );
}

#[tokio::test]
async fn a_refusal_in_the_margin_says_the_lease_ended_and_when_it_may_be_taken() {
    let at = READ_AT.plus(1500).rfc3339().unwrap();
    let open = message(lock_held(Some(1500), true, 0)).await;
    assert!(open.contains("has ended") && open.contains(&at), "{open}");
    let queued = message(lock_held(Some(1500), false, 1)).await;
    assert!(
        queued.contains(&at) && queued.contains("queued"),
        "{queued}"
    );
    let held = message(lock_held(None, false, 0)).await;
    assert!(held.contains("held by another caller"), "{held}");
}
