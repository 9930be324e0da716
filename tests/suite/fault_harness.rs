//! Smoke tests of the fault-injection harness (`tests/common/{ensemble,proxy,instance}.rs`):
//! each capability is exercised once and shown by what a client observes.

use crate::common;

use std::time::{Duration, Instant};

use common::ensemble::{Ensemble, EnsembleOptions};
use common::framing::op;
use common::instance::{Instance, InstanceOptions};
use common::proxy::{Mode, Proxy};
use common::{eventually, unique_root, zk};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use zookeeper_client as zkc;

async fn connect(connect_string: &str) -> zkc::Client {
    zkc::Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .with_connection_timeout(Duration::from_secs(5))
        .connect(connect_string)
        .await
        .unwrap_or_else(|e| panic!("connecting to {connect_string}: {e}"))
}

async fn create(client: &zkc::Client, path: &str, data: &[u8]) {
    let options = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
    client.create(path, data, &options).await.unwrap();
}

async fn data(client: &zkc::Client, path: &str) -> Option<Vec<u8>> {
    client.get_data(path).await.ok().map(|(data, _)| data)
}

async fn assert_data(client: &zkc::Client, path: &str, want: &[u8]) {
    assert_eq!(data(client, path).await.as_deref(), Some(want), "{path}");
}

/// Whether the peer closes `stream` (end of stream or reset) within 2 s.
async fn closed(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(Duration::from_secs(2), stream.read(&mut buf)).await;
    matches!(read, Ok(Ok(0)) | Ok(Err(_)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensemble_elects_serves_and_survives_the_leader_s_death() {
    let ensemble = Ensemble::start(EnsembleOptions::default()).await;
    let leader = ensemble.leader().await.expect("a leader");
    let client = connect(&ensemble.connect_string()).await;
    create(&client, "/smoke", b"one").await;

    ensemble.kill(leader);
    assert!(!ensemble.is_running(leader));
    assert_eq!(ensemble.mode(leader).await, None, "a killed node answers");
    eventually(Duration::from_secs(30), "a new leader", || async {
        matches!(ensemble.leader().await, Some(new) if new != leader)
    })
    .await;
    ensemble.wait_serving(Duration::from_secs(30)).await;
    let survivor = (1..=3).find(|id| *id != leader).unwrap();
    let survivor = connect(&ensemble.client_connect(survivor)).await;
    assert_data(&survivor, "/smoke", b"one").await;

    ensemble.restart(leader).await;
    ensemble.wait_serving(Duration::from_secs(30)).await;
    assert_eq!(ensemble.mode(leader).await.as_deref(), Some("follower"));
    let back = connect(&ensemble.client_connect(leader)).await;
    assert_data(&back, "/smoke", b"one").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensemble_node_pauses_and_resumes() {
    let ensemble = Ensemble::start(EnsembleOptions::default()).await;
    let leader = ensemble.leader().await.expect("a leader");
    let follower = (1..=3).find(|id| *id != leader).unwrap();
    let writer = connect(&ensemble.client_connect(leader)).await;
    let pid = ensemble.pid(follower).unwrap();

    ensemble.pause(follower);
    assert_eq!(zk::process_state(pid), Some('T'), "the paused JVM runs");
    assert_eq!(ensemble.mode(follower).await, None, "a paused node answers");
    create(&writer, "/paused", b"written while paused").await;
    // The leader gives up on the silent follower after syncLimit (5 s).
    eventually(
        Duration::from_secs(20),
        "the leader to drop the follower",
        || async { ensemble.mntr(leader, "zk_synced_followers").await == Some(1) },
    )
    .await;

    ensemble.resume(follower);
    assert_ne!(
        zk::process_state(pid),
        Some('T'),
        "the resumed JVM is stopped"
    );
    eventually(
        Duration::from_secs(30),
        "the follower to rejoin",
        || async { ensemble.mode(follower).await.as_deref() == Some("follower") },
    )
    .await;
    ensemble.wait_serving(Duration::from_secs(30)).await;
    let reader = connect(&ensemble.client_connect(follower)).await;
    assert_data(&reader, "/paused", b"written while paused").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lagging_follower_sees_writes_late_and_the_ensemble_serves() {
    let lag = Duration::from_secs(1);
    let options = EnsembleOptions {
        lagging: Some((1, lag)),
    };
    let ensemble = Ensemble::start(options).await;
    ensemble.make_follower(1).await;
    assert_eq!(ensemble.mode(1).await.as_deref(), Some("follower"));
    let proxied = ensemble.lag_proxies().iter().map(|p| p.open_connections());
    assert!(
        proxied.sum::<usize>() > 0,
        "node 1 reaches nobody through its proxies"
    );

    let writer = connect(&ensemble.client_connect(2)).await;
    let lagging = connect(&ensemble.client_connect(1)).await;
    create(&writer, "/lag", b"0").await;
    eventually(
        Duration::from_secs(20),
        "the create to reach node 1",
        || async { data(&lagging, "/lag").await.is_some() },
    )
    .await;

    let written = Instant::now();
    writer.set_data("/lag", b"1", None).await.unwrap();
    let seen_by_writer = written.elapsed();
    let deadline = written + Duration::from_secs(20);
    while data(&lagging, "/lag").await.as_deref() != Some(&b"1"[..]) {
        assert!(Instant::now() < deadline, "node 1 never saw the write");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let seen_by_lagging = written.elapsed();
    eprintln!("write seen by the writer in {seen_by_writer:?}, by node 1 in {seen_by_lagging:?}");
    assert!(
        seen_by_lagging >= Duration::from_millis(500),
        "node 1 saw the write {seen_by_lagging:?} after it was made (the writer in {seen_by_writer:?})"
    );

    // The ensemble still serves, through any node.
    let client = connect(&ensemble.connect_string()).await;
    create(&client, "/still-serving", b"yes").await;
    ensemble.wait_serving(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_cut_after_set_data_drops_the_reply_but_the_write_lands() {
    let server = zk::shared();
    let path = unique_root();
    let direct = common::zk_client(server).await;
    create(&direct, &path, b"before").await;
    let proxy = Proxy::start(([127, 0, 0, 1], server.port).into());
    let client = connect(&proxy.connect_string()).await;
    assert_eq!(data(&client, &path).await.as_deref(), Some(&b"before"[..]));

    let refuse_for = Duration::from_secs(3);
    proxy.set_mode(Mode::CutAfter {
        ops: vec![op::SET_DATA],
        refuse_for,
    });
    let accepted = proxy.accepted();
    let set = client.set_data(&path, b"after", None);
    let answer = tokio::time::timeout(Duration::from_secs(15), set).await;
    let refused_until = Instant::now() + refuse_for;
    eprintln!("setData through the cut answered {answer:?}");
    assert!(
        matches!(answer, Ok(Err(_))),
        "setData through a cut answered {answer:?}"
    );
    assert_eq!(proxy.fired(), 1);
    assert_eq!(proxy.mode(), Mode::Pass, "a CutAfter disarms when it fires");

    // New connections are refused for a while (accepted and closed at once), then pass.
    let mut refused = TcpStream::connect(proxy.addr()).await.unwrap();
    let was_closed = closed(&mut refused).await;
    assert!(was_closed || Instant::now() >= refused_until, "not refused");
    eventually(Duration::from_secs(10), "the cut write to land", || async {
        data(&direct, &path).await.as_deref() == Some(&b"after"[..])
    })
    .await;
    eventually(
        Duration::from_secs(20),
        "the proxy to pass again",
        || async {
            let connect_string = proxy.connect_string();
            let again = zkc::Client::connect(&connect_string);
            match tokio::time::timeout(Duration::from_secs(5), again).await {
                Ok(Ok(client)) => data(&client, &path).await.as_deref() == Some(&b"after"[..]),
                _ => false,
            }
        },
    )
    .await;
    assert!(proxy.accepted() > accepted + 1, "nobody came back");
    assert_eq!(proxy.fired(), 1, "fired again without being armed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_black_hole_times_out_and_refuse_closes() {
    let server = zk::shared();
    let path = unique_root();
    create(&common::zk_client(server).await, &path, b"x").await;
    let proxy = Proxy::start(([127, 0, 0, 1], server.port).into());
    let client = connect(&proxy.connect_string()).await;
    assert!(data(&client, &path).await.is_some());

    proxy.set_mode(Mode::BlackHole);
    let call = tokio::time::timeout(Duration::from_secs(2), client.get_data(&path)).await;
    assert!(
        call.is_err(),
        "a call through a black hole answered: {call:?}"
    );
    // A new connection is accepted, swallowed and kept open.
    let mut raw = TcpStream::connect(proxy.addr()).await.unwrap();
    raw.write_all(b"ruok").await.unwrap();
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(Duration::from_millis(1500), raw.read(&mut buf)).await;
    assert!(read.is_err(), "a black hole answered: {read:?}");

    proxy.set_mode(Mode::Pass);
    let mut raw = TcpStream::connect(proxy.addr()).await.unwrap();
    raw.write_all(b"ruok").await.unwrap();
    let mut answer = String::new();
    raw.read_to_string(&mut answer).await.unwrap();
    assert_eq!(answer, "imok");

    let mut open = TcpStream::connect(proxy.addr()).await.unwrap();
    eventually(Duration::from_secs(5), "the proxy to count it", || async {
        proxy.open_connections() >= 1
    })
    .await;
    proxy.set_mode(Mode::Refuse);
    assert_eq!(proxy.open_connections(), 0);
    assert!(closed(&mut open).await, "Refuse left a connection open");
    let mut refused = TcpStream::connect(proxy.addr()).await.unwrap();
    assert!(closed(&mut refused).await, "Refuse let a connection in");

    proxy.set_mode(Mode::Pass);
    let mut kept = TcpStream::connect(proxy.addr()).await.unwrap();
    eventually(Duration::from_secs(5), "the connection to open", || async {
        proxy.open_connections() >= 1
    })
    .await;
    proxy.drop_all();
    assert!(closed(&mut kept).await, "drop_all left a connection open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_delay_delays() {
    let server = zk::shared();
    let path = unique_root();
    create(&common::zk_client(server).await, &path, b"x").await;
    let proxy = Proxy::start(([127, 0, 0, 1], server.port).into());
    let client = connect(&proxy.connect_string()).await;
    let timed = || async {
        let started = Instant::now();
        assert!(data(&client, &path).await.is_some());
        started.elapsed()
    };
    let delay = Duration::from_millis(300);

    proxy.set_mode(Mode::Delay(delay));
    let both = timed().await;
    assert!(both >= 2 * delay, "a round trip took {both:?}");
    proxy.set_mode(Mode::DelayReplies(delay));
    let replies = timed().await;
    assert!(replies >= delay, "a round trip took {replies:?}");
    proxy.set_mode(Mode::Pass);
    let passed = timed().await;
    eprintln!("round trips: delayed {both:?}, replies delayed {replies:?}, passed {passed:?}");
    assert!(passed < both, "undelayed {passed:?}, delayed {both:?}");
}

fn now_ms() -> i128 {
    time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000
}

/// Acquires a fresh lock and asserts that its `acquired_at` is `ahead_ms` (±1 s) ahead of our
/// clock, given when the request was sent and answered.
async fn assert_ahead(instance: &Instance, ahead_ms: i128) {
    let name = format!("clock-{}", uuid::Uuid::new_v4().simple());
    let path = format!("/v1/locks/{name}/acquire");
    let before = now_ms();
    let (status, body) = instance
        .post(&path, json!({"owner": "a", "lease_ms": 10000}))
        .await;
    let after = now_ms();
    assert_eq!(status, 200, "{body}");
    let text = body["lock"]["acquired_at"].as_str().expect("acquired_at");
    let at = time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|e| panic!("{text}: {e}"));
    let at = at.unix_timestamp_nanos() / 1_000_000;
    let (low, high) = (at - after, at - before);
    let window = ahead_ms - 1000..=ahead_ms + 1000;
    assert!(
        window.contains(&low) && window.contains(&high),
        "acquired_at is {low}..{high} ms ahead, not {ahead_ms}"
    );
}

/// Whether `url` answers within `within`.
async fn answers(url: &str, within: Duration) -> bool {
    let http = common::http_client();
    http.get(url).timeout(within).send().await.is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faketime_instance_runs_ahead_and_survives_restart_and_pause() {
    let mut ahead = Instance::start(InstanceOptions::new(&[]).clock_offset_ms(5000)).await;
    let behind = Instance::start(InstanceOptions::new(&[]).clock_offset_ms(-5000)).await;
    assert_ahead(&ahead, 5000).await;
    assert_ahead(&behind, -5000).await;

    let (base, pid) = (ahead.base().to_owned(), ahead.pid().unwrap());
    ahead.restart().await;
    assert_eq!(ahead.base(), base, "the port changed on restart");
    assert_ne!(ahead.pid(), Some(pid));
    assert_ahead(&ahead, 5000).await;

    let health = format!("{base}/healthz");
    ahead.pause();
    let paused = answers(&health, Duration::from_secs(1)).await;
    assert!(!paused, "a paused instance answered");
    ahead.resume();
    assert!(answers(&health, Duration::from_secs(10)).await);

    ahead.kill();
    assert_eq!(ahead.pid(), None);
    let killed = answers(&health, Duration::from_secs(5)).await;
    assert!(!killed, "a killed instance answered");
}
