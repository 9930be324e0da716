//! The collector's phases and its sweep, on the in-memory store.

use super::*;
use crate::record::LockRecord;
use crate::store::memory::MemoryStore;
use crate::store::Reads;
use crate::store::{Fresh, RecordWrite, Version, WriteOutcome};

const DELAY: Duration = Duration::from_millis(300);

fn timing() -> GcTiming {
    GcTiming {
        delay: DELAY,
        store_timeout: Duration::from_millis(100),
        sweep_every: Duration::from_secs(3600),
    }
}

async fn version_of(store: &MemoryStore, name: &LockName) -> Option<i32> {
    let deadline = Instant::now() + Duration::from_secs(1);
    store
        .read(name, Fresh::Any, deadline)
        .await
        .unwrap()
        .map(|s| s.version.number())
}

async fn free_record(store: &Arc<MemoryStore>, name: &LockName) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(1);
    match store
        .write(name, RecordWrite::Create(&LockRecord::default()), deadline)
        .await
        .unwrap()
    {
        WriteOutcome::Written { version, .. } => version.number(),
        other => panic!("{other:?}"),
    }
}

async fn poll(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_scheduled_free_record_is_fenced_then_deleted_a_delay_apart() {
    let store = Arc::new(MemoryStore::new());
    let name = LockName::parse("gc/a").unwrap();
    let freed = free_record(&store, &name).await;
    // A record present before the collector starts is found by its first sweep too;
    // this one is also scheduled, as a release would.
    let collector = Collector::start(store.clone(), timing());
    collector.schedule(&name);
    poll("the fence", async || {
        version_of(&store, &name).await == Some(freed + 1)
    })
    .await;
    let fenced_at = Instant::now();
    poll("the delete", async || {
        version_of(&store, &name).await.is_none()
    })
    .await;
    assert!(
        fenced_at.elapsed() >= DELAY - TICK * 2,
        "deleted a delay after the fence"
    );
}

#[tokio::test]
async fn the_sweep_collects_free_records_that_nobody_scheduled() {
    let store = Arc::new(MemoryStore::new());
    let names: Vec<LockName> = (0..5)
        .map(|i| LockName::parse(&format!("left/{i}")).unwrap())
        .collect();
    for name in &names {
        free_record(&store, name).await;
    }
    let _collector = Collector::start(store.clone(), timing());
    for name in &names {
        poll("the sweep to collect", async || {
            version_of(&store, name).await.is_none()
        })
        .await;
    }
}

#[tokio::test]
async fn a_record_reused_before_either_phase_stays() {
    let store = Arc::new(MemoryStore::new());
    let (early, late) = (
        LockName::parse("gc/early").unwrap(),
        LockName::parse("gc/late").unwrap(),
    );
    let collector = Collector::start(store.clone(), timing());
    for name in [&early, &late] {
        free_record(&store, name).await;
        collector.schedule(name);
    }
    let deadline = Instant::now() + Duration::from_secs(1);
    let held = LockRecord {
        queued: Some(0),
        ..LockRecord::default()
    };
    // Reused before the fence.
    store
        .write(
            &early,
            RecordWrite::Update(&held, Version::plain(0)),
            deadline,
        )
        .await
        .unwrap();
    // Reused after the fence, before the delete.
    poll("the fence", async || {
        version_of(&store, &late).await == Some(1)
    })
    .await;
    store
        .write(
            &late,
            RecordWrite::Update(&held, Version::plain(1)),
            deadline,
        )
        .await
        .unwrap();
    tokio::time::sleep(DELAY * 3).await;
    assert!(version_of(&store, &early).await.is_some());
    assert!(version_of(&store, &late).await.is_some());
}

#[test]
fn a_name_released_again_and_again_has_one_fence_queued() {
    let mut pending = Pending::default();
    let (busy, other) = (
        LockName::parse("gc/busy").unwrap(),
        LockName::parse("gc/other").unwrap(),
    );
    let start = Instant::now();
    for i in 0..1_000 {
        push(
            &mut pending,
            start + DELAY + Duration::from_millis(i),
            &busy,
            Phase::Fence,
            0,
        );
    }
    push(&mut pending, start + DELAY, &other, Phase::Fence, 0);
    assert_eq!(pending.due.len(), 2, "one item per name, not per release");
    assert_eq!(
        pending.fence_due.get(&busy),
        Some(&(start + DELAY + Duration::from_millis(999)))
    );
    // Still in due order.
    assert!(pending
        .due
        .iter()
        .zip(pending.due.iter().skip(1))
        .all(|(a, b)| a.due <= b.due));
}

#[test]
fn a_postponed_fence_comes_up_a_delay_after_the_last_release() {
    let mut pending = Pending::default();
    let name = LockName::parse("gc/postponed").unwrap();
    let start = Instant::now();
    push(&mut pending, start + DELAY, &name, Phase::Fence, 0);
    let later = start + DELAY + Duration::from_millis(100);
    push(&mut pending, later, &name, Phase::Fence, 0);
    assert!(
        take_due(&mut pending, start + DELAY).is_empty(),
        "postponed: not due at the first release's time"
    );
    assert_eq!(pending.due.len(), 1, "back in the queue, once");
    let ready = take_due(&mut pending, later);
    assert_eq!(ready.len(), 1);
    assert_eq!(ready[0].name, name);
    assert_eq!(ready[0].phase, Phase::Fence);
    assert!(pending.due.is_empty() && pending.fence_due.is_empty());
    // Released again after its fence was taken: scheduled afresh.
    push(&mut pending, later + DELAY, &name, Phase::Fence, 0);
    assert_eq!(pending.due.len(), 1);
}

/// A delete that finds the record fenced again by another instance's item ends its own
/// item, and leaves the delete to that one: were it to fence again, items of three
/// instances could keep moving the record before each other's deletes for ever.
#[tokio::test]
async fn a_delete_that_finds_another_fence_leaves_the_record_to_it() {
    let store = Arc::new(MemoryStore::new());
    let name = LockName::parse("gc/b").unwrap();
    free_record(&store, &name).await;
    let deadline = Instant::now() + Duration::from_secs(1);
    let fence = Collect::Fence(&name);
    let Collected::Fenced(mine) = store.collect(fence, collectable, deadline).await.unwrap() else {
        panic!("fenced");
    };
    // Another instance's item fences the record again.
    let again = store.collect(fence, collectable, deadline).await.unwrap();
    assert!(matches!(again, Collected::Fenced(theirs) if theirs != mine));
    let item = Item {
        due: Instant::now(),
        name: name.clone(),
        phase: Phase::Delete(mine),
        tries: 0,
    };
    assert_eq!(run(store.as_ref(), &item, timing()).await, None);
    assert!(
        version_of(&store, &name).await.is_some(),
        "the record is not this item's to delete"
    );
}
