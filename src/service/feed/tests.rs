//! The hub on the in-memory store: a stream that stops reading, and the hub's lifetime.
//! (The randomised test of the hub against a model is tests/suite/hub_model.rs.)

use std::time::Duration;
use tokio::time::Instant;

use super::*;
use crate::model::UnixMillis;
use crate::record::Holder;
use crate::service::WallClock;
use crate::store::memory::MemoryStore;
use crate::store::RecordWrite;

fn held(owner: &str) -> LockRecord {
    LockRecord::held_by(Holder {
        lease_id: Some(crate::model::LeaseId::random()),
        ..Holder::minimal(owner)
    })
}

fn settings() -> HubSettings {
    HubSettings {
        store_timeout: Duration::from_secs(1),
        reads: IntCounter::new("reads", "reads").unwrap(),
        clock: WallClock::system(),
        max_clock_skew_ms: 0,
    }
}

/// A stream on every lock.
async fn open_all(hub: &Hub) -> Subscription {
    hub.open(Interest::Prefix(String::new()), None)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_stream_that_does_not_read_is_closed_not_buffered_without_bound() {
    let store: Arc<dyn LockStore> = Arc::new(MemoryStore::new());
    let hub = Hub::start(store.clone(), settings());
    let mut reading = open_all(&hub).await;
    let mut idle = open_all(&hub).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    let total = STREAM_BUFFER + 10;
    for i in 0..total {
        let name = LockName::parse(&format!("l{i}")).unwrap();
        store
            .write(&name, RecordWrite::Create(&held("o")), deadline)
            .await
            .unwrap();
        // The reading stream keeps up, event by event.
        let event = tokio::time::timeout(Duration::from_secs(5), reading.live.next())
            .await
            .unwrap()
            .expect("a stream that reads keeps getting events");
        assert_eq!(
            (event.kind, event.lock.name.as_str()),
            (EventType::Acquired, name.as_str())
        );
    }
    // The idle one fell more than its buffer behind: it ends instead of growing.
    assert!(idle.live.next().await.is_none());
}

/// The next event of `stream`, within 5 s.
async fn next(stream: &mut Subscription) -> Arc<StreamEvent> {
    tokio::time::timeout(Duration::from_secs(5), stream.live.next())
        .await
        .expect("an event in time")
        .expect("the stream is open")
}

fn held_until(end: i64) -> LockRecord {
    let mut record = held("o");
    if let Some(holder) = record.holder_mut() {
        holder.expires = crate::record::Expiry::At(UnixMillis(end));
    }
    record
}

#[tokio::test]
async fn opening_a_stream_takes_no_event_from_the_others() {
    let store: Arc<dyn LockStore> = Arc::new(MemoryStore::new());
    let hub = Hub::start(store.clone(), settings());
    let mut all = open_all(&hub).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    for i in 0..40 {
        let name = LockName::parse(&format!("x{i}")).unwrap();
        store
            .write(&name, RecordWrite::Create(&held("o")), deadline)
            .await
            .unwrap();
        // Opened while the hub may not have read the change yet: whichever it handles
        // first, the stream already open hears the grant, once.
        let interest = match i % 2 {
            0 => Interest::Lock(name.clone()),
            _ => Interest::Prefix(name.as_str().to_owned()),
        };
        let _opened = hub.open(interest, None).await.unwrap();
        let event = next(&mut all).await;
        assert_eq!(
            (event.kind, event.lock.name.as_str()),
            (EventType::Acquired, name.as_str())
        );
    }
}

#[tokio::test]
async fn a_lease_end_a_new_snapshot_shows_is_told_to_the_streams_open_before() {
    let store: Arc<dyn LockStore> = Arc::new(MemoryStore::new());
    // The wall clock is the test's: the lease ends on it long before the hub's timer (on
    // tokio's clock) comes, so the new stream's snapshot is the first to see the end.
    let wall = Arc::new(std::sync::atomic::AtomicI64::new(1_000_000));
    let clock = wall.clone();
    let hub = Hub::start(
        store.clone(),
        HubSettings {
            clock: WallClock::new(move || {
                UnixMillis(clock.load(std::sync::atomic::Ordering::SeqCst))
            }),
            ..settings()
        },
    );
    let name = LockName::parse("a").unwrap();
    let mut first = hub.open(Interest::Lock(name.clone()), None).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    store
        .write(&name, RecordWrite::Create(&held_until(1_060_000)), deadline)
        .await
        .unwrap();
    assert_eq!(next(&mut first).await.kind, EventType::Acquired);
    wall.store(1_070_000, std::sync::atomic::Ordering::SeqCst);

    let second = open_all(&hub).await;
    let Opening::Snapshot { locks, .. } = second.opening else {
        panic!("a snapshot");
    };
    assert_eq!(locks.len(), 1);
    let expired = next(&mut first).await;
    assert_eq!(
        (expired.kind, expired.lock.name.as_str()),
        (EventType::Expired, "a")
    );
}

#[tokio::test]
async fn the_task_ends_when_the_handle_and_its_streams_are_gone() {
    let store: Arc<dyn LockStore> = Arc::new(MemoryStore::new());
    let hub = Hub::start(store, settings());
    let mut stream = open_all(&hub).await;
    // A stream keeps the task alive after the handle goes ...
    drop(hub);
    assert!(
        tokio::time::timeout(Duration::from_millis(100), stream.live.next())
            .await
            .is_err(),
        "the stream stays open while the task runs"
    );
    // ... and once it goes too, the task ends, and with it the broadcast of events.
    let mut events = stream.live.events.resubscribe();
    drop(stream);
    let ended = tokio::time::timeout(Duration::from_secs(5), events.recv()).await;
    assert!(
        matches!(ended, Ok(Err(broadcast::error::RecvError::Closed))),
        "the hub's task ended"
    );
}

mod lease_ends {
    use std::collections::BTreeSet;

    use super::super::expiry::follow_leases;
    use super::super::{Armed, Known, LeaseEnd};
    use crate::model::{FencingToken, LockName, UnixMillis};

    const NOW: UnixMillis = UnixMillis(10_000);
    const T: Option<FencingToken> = Some(FencingToken(7));

    fn at(
        known: &mut Known,
        armed: &mut BTreeSet<Armed>,
        ends: &[i64],
        now: UnixMillis,
        shown: bool,
    ) -> usize {
        let ends = ends.iter().map(|at| (T, *at)).collect();
        let name = LockName::parse("l").unwrap();
        follow_leases(armed, &name, known, ends, now, shown).len()
    }

    fn follow(known: &mut Known, armed: &mut BTreeSet<Armed>, ends: &[i64]) -> usize {
        at(known, armed, ends, NOW, false)
    }

    #[test]
    fn an_end_to_come_is_armed_once_however_often_it_is_read() {
        let (mut known, mut armed) = (Known::default(), BTreeSet::new());
        for _ in 0..3 {
            assert_eq!(follow(&mut known, &mut armed, &[12_000]), 0);
        }
        assert_eq!(armed.len(), 1);
        let untold = LeaseEnd {
            token: T,
            at: 12_000,
            told: false,
        };
        assert_eq!(known.leases, [untold]);
    }

    #[test]
    fn an_end_that_has_come_is_told_once_and_never_armed_again() {
        let (mut known, mut armed) = (Known::default(), BTreeSet::new());
        assert_eq!(follow(&mut known, &mut armed, &[12_000]), 0);
        armed.clear(); // its timer fired
        let later = UnixMillis(12_000);
        assert_eq!(at(&mut known, &mut armed, &[12_000], later, false), 1);
        for _ in 0..3 {
            assert_eq!(at(&mut known, &mut armed, &[12_000], later, false), 0);
        }
        assert!(armed.is_empty(), "a passed end is never armed again");
    }

    #[test]
    fn an_end_first_read_after_it_came_is_told_at_once_or_shown() {
        let (mut known, mut armed) = (Known::default(), BTreeSet::new());
        assert_eq!(follow(&mut known, &mut armed, &[9_000]), 1);
        assert!(armed.is_empty());
        let mut shown = Known::default();
        assert_eq!(at(&mut shown, &mut armed, &[9_000], NOW, true), 0);
        let told = LeaseEnd {
            token: T,
            at: 9_000,
            told: true,
        };
        assert_eq!(shown.leases, [told]);
    }

    #[test]
    fn a_renewed_or_ended_lease_disarms_its_old_end() {
        let (mut known, mut armed) = (Known::default(), BTreeSet::new());
        follow(&mut known, &mut armed, &[12_000]);
        follow(&mut known, &mut armed, &[15_000]);
        let ends: Vec<i64> = armed.iter().map(|(_, _, end)| *end).collect();
        assert_eq!(ends, [15_000]);
        assert_eq!(follow(&mut known, &mut armed, &[]), 0);
        assert!(armed.is_empty() && known.leases.is_empty());
    }

    #[test]
    fn each_permit_s_end_is_armed_and_told_on_its_own() {
        let (mut known, mut armed) = (Known::default(), BTreeSet::new());
        follow(&mut known, &mut armed, &[12_000, 14_000]);
        assert_eq!(armed.len(), 2);
        let first = at(
            &mut known,
            &mut armed,
            &[12_000, 14_000],
            UnixMillis(12_500),
            false,
        );
        assert_eq!(first, 1, "only the first permit ran out");
        let second = at(
            &mut known,
            &mut armed,
            &[12_000, 14_000],
            UnixMillis(14_000),
            false,
        );
        assert_eq!(
            second, 1,
            "the second is told when it runs out, the first not again"
        );
    }
}
