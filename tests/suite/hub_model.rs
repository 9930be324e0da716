//! A randomised test of the event hub (`service::feed`) against a model of what each stream
//! must see: random acquires, renewals, releases, force releases, leases that run out,
//! subscriptions and unsubscriptions, on locks and prefixes, with several streams at once.
//!
//! After every step each stream must have got exactly the events of its locks that the
//! model says, in order, with growing ids; every subscription gets a snapshot that agrees
//! with the model; and a probe subscription is answered (within [`ANSWER`] of the test's
//! clock; a hub that never yields hangs its runtime instead, which the watchdog thread
//! catches). The steps wait for their events, so no two changes merge into one event and
//! no change races a new stream: `feed::tests` covers those races. The hub reads the store
//! only for the events it sends, and not at all while nothing changes.
//!
//! On the in-memory store time is the test's (tokio's paused clock, which the hub's wall
//! clock follows), over [`SEEDS`] seeds. On ZooKeeper a shorter run goes in real time.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use futures::FutureExt;
use lockwarden::model::{LeaseId, LockName, UnixMillis};
use lockwarden::record::{Expiry, Forced, Holder, LockRecord};
use lockwarden::service::feed::{
    EventId, EventType, Hub, HubSettings, Interest, LiveEvents, Opening,
};
use lockwarden::service::WallClock;
use lockwarden::store::Reads;
use lockwarden::store::{Fresh, LockStore, RecordWrite, WriteOutcome};
use prometheus::IntCounter;

/// Seeds run on the in-memory store.
const SEEDS: u64 = 500;
const STEPS: usize = 80;
const LOCKS: [&str; 4] = ["a/1", "a/2", "b/1", "c"];
const PREFIXES: [&str; 3] = ["", "a/", "b"];
/// A lease that does not run out within a run.
const LONG: i64 = 600_000;
/// How soon the hub must answer a new subscription.
const ANSWER: Duration = Duration::from_secs(1);

/// What the model expects a stream to get: the type, the lock, and its holder's lease.
type Expected = (EventType, String, Option<LeaseId>);

#[derive(Clone, Copy)]
struct Lease {
    id: LeaseId,
    end: i64,
    told: bool,
}

/// How the run's time goes.
#[derive(Clone, Copy, PartialEq)]
enum Time {
    /// tokio's paused clock: leases end at x5 ms, steps start at x0 ms.
    Paused,
    Real,
}

struct Stream {
    interest: Interest,
    live: LiveEvents,
    last: EventId,
}

struct Run {
    store: Arc<dyn LockStore>,
    hub: Hub,
    reads: IntCounter,
    clock: WallClock,
    time: Time,
    rng: fastrand::Rng,
    locks: BTreeMap<String, Option<Lease>>,
    streams: Vec<Stream>,
    /// Store reads the model allows the hub: one per change, lease end and opening.
    allowed: u64,
    /// Records created (on ZooKeeper, a nested name's create also makes its parent's node).
    creates: u64,
}

fn name(raw: &str) -> LockName {
    LockName::parse(raw).unwrap()
}

fn lease_of(holder: Option<&Holder>) -> Option<LeaseId> {
    holder.and_then(|h| h.lease_id)
}

impl Run {
    fn new(store: Arc<dyn LockStore>, clock: WallClock, time: Time, seed: u64) -> Run {
        let reads = IntCounter::new("hub_reads", "reads").unwrap();
        let settings = HubSettings {
            store_timeout: Duration::from_secs(5),
            reads: reads.clone(),
            clock: clock.clone(),
            max_clock_skew_ms: 0,
        };
        Run {
            hub: Hub::start(store.clone(), settings),
            store,
            reads,
            clock,
            time,
            rng: fastrand::Rng::with_seed(seed),
            locks: LOCKS.iter().map(|l| (l.to_string(), None)).collect(),
            streams: Vec::new(),
            allowed: 0,
            creates: 0,
        }
    }

    fn now(&self) -> i64 {
        self.clock.now().0
    }

    /// Writes `holder` (or a free record) over `lock`'s record.
    async fn write(&mut self, lock: &str, holder: Option<Holder>, forced: Option<Forced>) {
        let deadline = Instant::now() + Duration::from_secs(5);
        let record = LockRecord {
            holders: holder.into_iter().collect(),
            limit: None,
            requestor: None,
            queued: None,
            forced,
            ended_lease: None,
        };
        let lock = name(lock);
        let outcome = match self.store.read(&lock, Fresh::Any, deadline).await.unwrap() {
            Some(stored) => self.store.write(
                &lock,
                RecordWrite::Update(&record, stored.version),
                deadline,
            ),
            None => {
                self.creates += 1;
                self.store
                    .write(&lock, RecordWrite::Create(&record), deadline)
            }
        };
        let outcome = outcome.await.unwrap();
        assert!(
            matches!(outcome, WriteOutcome::Written { .. }),
            "{outcome:?}"
        );
        self.allowed += 1;
    }

    /// The holder of `lease`, granted for `ms` (so that a renewal always changes the record).
    fn holder(&self, lease: &Lease, ms: i64, owner: &str) -> Holder {
        Holder {
            owner: owner.into(),
            message: String::new(),
            expires: Expiry::At(UnixMillis(lease.end)),
            priority: 0,
            waiting_ms: None,
            cleanup_ms: 0,
            forceful: false,
            lease_id: Some(lease.id),
            lease_ms: Some(ms as u64),
            acquired_at: Some(UnixMillis(0)),
            fencing_token: None,
            notify_url: None,
            request_id: None,
            request_digest: None,
        }
    }

    /// Writes `lease`, granted for `ms`, as `lock`'s holder; the streams on it are to hear
    /// `kind`. The lease if it runs out within the run.
    async fn hold(
        &mut self,
        lock: &str,
        lease: Lease,
        ms: i64,
        kind: EventType,
        expected: &mut [Vec<Expected>],
    ) -> Option<Lease> {
        let holder = self.holder(&lease, ms, "acquirer");
        self.write(lock, Some(holder), None).await;
        self.locks.insert(lock.to_owned(), Some(lease));
        self.expect(lock, expected, (kind, lock.to_owned(), Some(lease.id)));
        (ms != LONG).then_some(lease)
    }

    /// A lease length: half long; short ones end at x5 ms on the paused clock.
    fn lease_ms(&mut self) -> i64 {
        match (self.rng.bool(), self.time) {
            (false, _) => LONG,
            (true, Time::Paused) => 10 * self.rng.i64(0..6) + 5,
            (true, Time::Real) => 200,
        }
    }

    /// The events every stream that covers `lock` is to get.
    fn expect(&self, lock: &str, expected: &mut [Vec<Expected>], event: Expected) {
        for (i, stream) in self.streams.iter().enumerate() {
            if stream.interest.covers(&name(lock)) {
                expected[i].push(event.clone());
            }
        }
    }

    async fn step(&mut self) {
        let mut expected = vec![Vec::new(); self.streams.len()];
        let lock = LOCKS[self.rng.usize(..LOCKS.len())].to_string();
        let now = self.now();
        let current = self.locks[&lock];
        let live = current.filter(|l| l.end > now);
        let mut short = None;
        match self.rng.u32(0..10) {
            // Acquire a free or expired lock.
            0..=2 if live.is_none() => {
                let ms = self.lease_ms();
                let id = LeaseId::random();
                let lease = Lease {
                    id,
                    end: now + ms,
                    told: false,
                };
                short = self
                    .hold(&lock, lease, ms, EventType::Acquired, &mut expected)
                    .await;
            }
            // Renew a live lease, perhaps to one that runs out soon.
            3 | 4 if live.is_some() => {
                let ms = self.lease_ms();
                let lease = Lease {
                    end: now + ms,
                    ..live.unwrap()
                };
                short = self
                    .hold(&lock, lease, ms, EventType::Renewed, &mut expected)
                    .await;
            }
            // Release a lease: said only while it is live (`expired` was said when not).
            5 if current.is_some() => {
                self.write(&lock, None, None).await;
                self.locks.insert(lock.clone(), None);
                if live.is_some() {
                    self.expect(
                        &lock,
                        &mut expected,
                        (EventType::Released, lock.clone(), None),
                    );
                }
            }
            6 if current.is_some() => {
                self.write(&lock, None, Some(Forced::Admin)).await;
                self.locks.insert(lock.clone(), None);
                self.expect(
                    &lock,
                    &mut expected,
                    (EventType::ForceReleased, lock.clone(), None),
                );
            }
            7 => {
                self.subscribe().await;
                expected.push(Vec::new());
            }
            8 if !self.streams.is_empty() => {
                let i = self.rng.usize(..self.streams.len());
                self.streams.remove(i);
                expected.remove(i);
            }
            _ => {}
        }
        self.pass_time(&mut expected, short).await;
        self.check(expected).await;
        self.probe().await;
    }

    /// Lets time pass: on the paused clock to a later x0 ms, telling every lease that ends
    /// on the way; in real time, until a short lease just made has run out.
    async fn pass_time(&mut self, expected: &mut [Vec<Expected>], short: Option<Lease>) {
        let until = match self.time {
            Time::Paused => {
                let step = 10 * self.rng.i64(1..6) + if self.rng.u8(..20) == 0 { 1000 } else { 0 };
                (self.now() / 10) * 10 + step
            }
            Time::Real => match short {
                Some(lease) => {
                    while self.now() <= lease.end {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    lease.end
                }
                None => return,
            },
        };
        self.pass_time_to(expected, until).await;
    }

    async fn pass_time_to(&mut self, expected: &mut [Vec<Expected>], until: i64) {
        let now = self.now();
        if until > now {
            tokio::time::sleep(Duration::from_millis((until - now) as u64)).await;
        }
        let mut ended: Vec<(i64, String)> = self
            .locks
            .iter()
            .filter_map(|(lock, lease)| {
                lease
                    .filter(|l| !l.told && l.end <= until)
                    .map(|l| (l.end, lock.clone()))
            })
            .collect();
        ended.sort();
        for (_, lock) in ended {
            let lease = self.locks.get_mut(&lock).unwrap().as_mut().unwrap();
            lease.told = true;
            let id = lease.id;
            self.allowed += 1;
            self.expect(
                &lock,
                expected,
                (EventType::Expired, lock.clone(), Some(id)),
            );
        }
    }

    async fn check(&mut self, expected: Vec<Vec<Expected>>) {
        for (stream, expected) in self.streams.iter_mut().zip(expected) {
            let mut got = Vec::new();
            match self.time {
                Time::Paused => {
                    // The hub was idle before the paused clock moved: all is sent.
                    while let Some(Some(event)) =
                        tokio::task::unconstrained(stream.live.next()).now_or_never()
                    {
                        got.push(event);
                    }
                }
                Time::Real => {
                    for _ in &expected {
                        let next =
                            tokio::time::timeout(Duration::from_secs(10), stream.live.next());
                        got.push(
                            next.await
                                .expect("an event in time")
                                .expect("the stream is open"),
                        );
                    }
                }
            }
            let seen: Vec<Expected> = got
                .iter()
                .map(|e| {
                    (
                        e.kind,
                        e.lock.name.as_str().to_owned(),
                        lease_of(e.lock.record.holder()),
                    )
                })
                .collect();
            assert_eq!(
                seen, expected,
                "the events of a stream on {:?}",
                stream.interest
            );
            for event in got {
                assert!(
                    event.id > stream.last,
                    "ids grow: {} after {}",
                    event.id,
                    stream.last
                );
                stream.last = event.id;
            }
        }
    }

    async fn subscribe(&mut self) {
        let interest = match self.rng.bool() {
            true => Interest::Lock(name(LOCKS[self.rng.usize(..LOCKS.len())])),
            false => Interest::Prefix(PREFIXES[self.rng.usize(..PREFIXES.len())].into()),
        };
        self.allowed += 1;
        let opened = tokio::time::timeout(ANSWER, self.hub.open(interest.clone(), None))
            .await
            .expect("the hub answers a subscription at once")
            .unwrap();
        let Opening::Snapshot {
            id,
            locks,
            truncated,
        } = opened.opening
        else {
            panic!("a new stream starts with a snapshot");
        };
        assert!(!truncated);
        let seen: Vec<(String, Option<LeaseId>)> = locks
            .iter()
            .map(|l| (l.name.as_str().to_owned(), lease_of(l.record.holder())))
            .collect();
        let want: Vec<(String, Option<LeaseId>)> = match &interest {
            Interest::Lock(lock) => vec![(
                lock.as_str().to_owned(),
                self.locks[lock.as_str()].map(|l| l.id),
            )],
            Interest::Prefix(_) => self
                .locks
                .iter()
                .filter(|(lock, lease)| lease.is_some() && interest.covers(&name(lock)))
                .map(|(lock, lease)| (lock.clone(), lease.map(|l| l.id)))
                .collect(),
        };
        assert_eq!(seen, want, "the snapshot of {interest:?}");
        self.streams.push(Stream {
            interest,
            live: opened.live,
            last: id,
        });
    }

    /// A new subscription is answered at once, whatever came before.
    async fn probe(&mut self) {
        self.allowed += 1;
        let interest = Interest::Lock(name(LOCKS[self.rng.usize(..LOCKS.len())]));
        tokio::time::timeout(ANSWER, self.hub.open(interest, None))
            .await
            .expect("the hub answers a subscription at once")
            .unwrap();
    }

    async fn finish(&mut self) {
        // Every short lease runs out, and is told.
        let mut expected = vec![Vec::new(); self.streams.len()];
        if self.time == Time::Paused {
            let until = self.now() + 1000;
            self.pass_time_to(&mut expected, until).await;
        }
        self.check(expected).await;
        let reads = self.reads.get();
        // On ZooKeeper the hub also reads what it follows when its watches are first set,
        // a create's notifications may reach it apart (the record's and its parent's), and
        // so may the 2–3 notifications of one record write, each then read in a turn of its
        // own: at most twice the exact budget, which the run on the paused clock keeps. (A
        // hub that reads in a loop reads thousands of times.)
        let allowed = match self.time {
            Time::Paused => self.allowed,
            Time::Real => 2 * self.allowed + 2 * self.creates + LOCKS.len() as u64,
        };
        assert!(
            reads <= allowed,
            "{reads} hub reads for {} changes, lease ends and openings ({} creates)",
            self.allowed,
            self.creates
        );
        // Nothing changes from here on: no read, whatever ran out before. On ZooKeeper a
        // notification of the last changes may still be on its way: the count must first
        // come to rest (a hub that keeps reading never does, and fails here).
        let reads = match self.time {
            Time::Paused => reads,
            Time::Real => self.reads_at_rest().await,
        };
        match self.time {
            Time::Paused => tokio::time::sleep(Duration::from_secs(10)).await,
            Time::Real => tokio::time::sleep(Duration::from_millis(500)).await,
        }
        assert_eq!(self.reads.get(), reads, "hub reads while nothing changed");
    }

    /// The hub's read count once it has not moved for 300 ms (within 5 s).
    async fn reads_at_rest(&self) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(5);
        let (mut last, mut since) = (self.reads.get(), Instant::now());
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let now = self.reads.get();
            if now != last {
                (last, since) = (now, Instant::now());
            } else if since.elapsed() >= Duration::from_millis(300) {
                return now;
            }
            assert!(
                Instant::now() < deadline,
                "the hub kept reading: {now} reads"
            );
        }
    }
}

/// One seed on the in-memory store, in a runtime of its own on tokio's paused clock.
fn memory_seed(seed: u64) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async {
        let start = tokio::time::Instant::now();
        // A whole second, so that steps fall at x0 ms and short leases end at x5 ms.
        let base = UnixMillis::now().0 / 1000 * 1000;
        let clock = WallClock::new(move || UnixMillis(base + start.elapsed().as_millis() as i64));
        let store: Arc<dyn LockStore> = Arc::new(lockwarden::store::memory::MemoryStore::new());
        let mut run = Run::new(store, clock, Time::Paused, seed);
        for _ in 0..STEPS {
            run.step().await;
        }
        run.finish().await;
    });
}

#[test]
fn the_hub_follows_the_model_on_the_embedded_store() {
    // A hub that never yields would hang its runtime: the seeds run on a thread of their
    // own, and this one fails the test if they do not end in time.
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let seeds = match std::env::var("HUB_MODEL_SEED") {
            Ok(seed) => seed.parse().map(|s| s..s + 1).unwrap(),
            Err(_) => 0..SEEDS,
        };
        for seed in seeds {
            let outcome = std::panic::catch_unwind(|| memory_seed(seed));
            if let Err(panic) = outcome {
                let _ = done.send(Err(seed));
                std::panic::resume_unwind(panic);
            }
        }
        let _ = done.send(Ok(()));
    });
    match finished.recv_timeout(Duration::from_secs(120)) {
        Ok(Ok(())) => {}
        Ok(Err(seed)) => panic!("seed {seed} failed (its panic is printed above)"),
        Err(_) => panic!("the seeds did not finish within 120 s: a hub stopped answering"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hub_follows_the_model_on_zookeeper() {
    let metrics = lockwarden::metrics::Metrics::new();
    let store = common::zk::store_at(common::zk::shared().connect_string(), &metrics, 1);
    let seed = fastrand::u64(..);
    println!("seed {seed}");
    let mut run = Run::new(Arc::new(store), WallClock::system(), Time::Real, seed);
    for _ in 0..40 {
        run.step().await;
    }
    run.finish().await;
}
