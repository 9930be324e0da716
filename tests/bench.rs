//! The benchmark tool runs every scenario (briefly) against a real service and ZooKeeper.
//! It checks that the tool works; the figures belong in BENCHMARKS.md, not in assertions.

mod common;

use common::receiver::SECRET;
use common::{http_client, zk, Service};
use lockwarden::bench::{relay, run, run_report, BenchArgs};
use reqwest::StatusCode;
use zookeeper_client as zkc;

/// Starts `lockwarden bench-relay` in process, on the shared ZooKeeper; returns its base URL.
async fn start_relay() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let connect = zk::shared().connect_string();
    tokio::spawn(async move {
        relay::serve_on(listener, &connect, std::future::pending())
            .await
            .expect("the relay serves")
    });
    base
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_runs_and_reports() {
    let svc = Service::zk_with(|args| {
        args.webhook_secret = Some(SECRET.into());
        args.webhook_allow_private = true;
    })
    .await;
    let mut args = BenchArgs::quick(svc.base.clone(), zk::shared().connect_string());
    args.service_pid = Some(std::process::id());
    args.relay_url = Some(start_relay().await);
    let report = run_report(args).await.expect("the benchmark runs");
    // With the `floor` scenario the parallel floor takes its turn in the rounds, and the
    // relay is compared with it.
    let parallel: Vec<_> = report
        .yardstick
        .iter()
        .filter(|r| r.figure.starts_with("parallel"))
        .collect();
    assert_eq!(parallel.len(), 2, "C=1 and C=4: {parallel:?}");
    for ratio in parallel {
        let relay = ratio.relay.as_ref().expect("the relay was measured");
        assert!(relay.relay_to_floor.is_some_and(|r| r > 0.0), "{ratio:?}");
    }
    let rows = report.rows;
    for scenario in [
        "floor",
        "uncontended",
        "parallel",
        "contended",
        "handoff",
        "preempt",
        "refusal",
        "memory",
        "zk shapes",
    ] {
        assert!(
            rows.iter().any(|r| r.scenario.starts_with(scenario)),
            "no {scenario} row in {rows:?}"
        );
    }
    // Each shape's row counts the pairs its clients completed.
    let shapes: Vec<_> = rows
        .iter()
        .filter(|r| r.scenario.starts_with("zk shapes"))
        .collect();
    assert_eq!(
        shapes.len(),
        3 * 2,
        "three shapes at 1 and 4 clients: {shapes:?}"
    );
    assert!(shapes.iter().all(|r| r.operations > 0), "{shapes:?}");
    let uncontended = rows
        .iter()
        .find(|r| r.scenario.starts_with("uncontended"))
        .unwrap();
    assert!(uncontended.operations > 0 && uncontended.p50_us > 0.0);
    assert!(
        uncontended.zk_writes_per_op >= 2.0,
        "the server counters are read: {uncontended:?}"
    );
    let preempt = rows
        .iter()
        .find(|r| r.scenario.starts_with("preempt"))
        .unwrap();
    assert!(preempt.operations > 0, "{preempt:?}");
    // Every try-lock was refused (the scenario fails otherwise), each on a read of the
    // latest copy: at least a sync and a read, as ZooKeeper counts them (the other tests
    // here share the server; tests/suite/latest_copy.rs counts a refusal's requests exactly).
    let refusal = rows
        .iter()
        .find(|r| r.scenario.starts_with("refusal"))
        .unwrap();
    assert!(refusal.operations > 0, "{refusal:?}");
    assert!(refusal.zk_reads_per_op >= 2.0, "{refusal:?}");
    let listing = rows
        .iter()
        .find(|r| r.scenario.starts_with("memory: list"))
        .unwrap();
    assert!(listing.note.starts_with("200 locks listed"), "{listing:?}");
}

/// The class path of Curator's driver, compiled into a temporary directory, when javac and
/// Debian's Curator jars are present (as `scripts/bench` builds it).
fn curator_classpath(dir: &std::path::Path) -> Option<String> {
    let java = std::path::Path::new("/usr/share/java");
    if !java.join("curator-recipes.jar").exists() {
        return None;
    }
    let root = env!("CARGO_MANIFEST_DIR");
    let jars = std::fs::read_to_string(format!("{root}/bench/curator/jars")).ok()?;
    let mut classpath = dir.display().to_string();
    for jar in jars.split_whitespace() {
        classpath.push_str(&format!(":{}/{jar}.jar", java.display()));
    }
    let compiled = std::process::Command::new("javac")
        .args(["-nowarn", "-d"])
        .arg(dir)
        .args(["-cp", &classpath])
        .arg(format!("{root}/bench/curator/CuratorBench.java"))
        .status()
        .ok()?;
    compiled.success().then_some(classpath)
}

/// With Curator present, the yardstick gives every compared figure as ratios to Curator's
/// and the floor's; without it, it says Curator was skipped. Short either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_yardstick_compares_with_curator_when_present() {
    let svc = Service::zk().await;
    let dir = std::env::temp_dir().join(format!("curator-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let classpath = curator_classpath(&dir);
    let mut args = BenchArgs::quick(svc.base.clone(), zk::shared().connect_string());
    args.scenarios = ["uncontended", "parallel", "contended"]
        .map(String::from)
        .to_vec();
    args.clients = vec![2];
    args.seconds = 0.3;
    args.curator_classpath = classpath.clone();
    args.relay_url = Some(start_relay().await);
    let report = run_report(args).await.expect("the benchmark runs");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(report.relay_skipped, None, "the relay was given");
    let uncontended = &report.yardstick[0];
    assert!(uncontended.figure.starts_with("uncontended"), "{report:?}");
    assert!(uncontended.to_floor > 0.0, "{uncontended:?}");
    assert_eq!(report.yardstick.len(), 4, "p50, p99, parallel, contended");
    for ratio in &report.yardstick {
        assert!(
            ratio.to_floor_spread.is_some(),
            "every figure is the median of rounds, with their spread: {ratio:?}"
        );
        // The relay does not wait, so it has no contended figure.
        let contended = ratio.figure.starts_with("contended");
        match &ratio.relay {
            Some(relay) => {
                assert!(!contended, "{ratio:?}");
                assert!(relay.relay > 0.0 && relay.to_relay > 0.0, "{ratio:?}");
                // The parallel floor is the `floor` scenario's, not run here: against the
                // sequential floor the relay's C clients would say nothing about the hop.
                let uncontended = ratio.figure.starts_with("uncontended");
                assert_eq!(relay.relay_to_floor.is_some(), uncontended, "{ratio:?}");
                assert!(relay.relay_to_floor.unwrap_or(1.0) > 0.0, "{ratio:?}");
                assert!(
                    relay.to_relay_spread.0 <= relay.to_relay_spread.1,
                    "{ratio:?}"
                );
            }
            None => assert!(contended, "the relay is measured beside {ratio:?}"),
        }
    }
    assert!(
        report
            .rows
            .iter()
            .any(|r| r.scenario.starts_with("HTTP relay") && r.operations > 0),
        "the relay's own rows: {:?}",
        report.rows
    );
    if classpath.is_some() {
        for ratio in &report.yardstick {
            assert!(ratio.to_curator.unwrap_or(0.0) > 0.0, "{ratio:?}");
            assert!(ratio.to_curator_spread.is_some(), "{ratio:?}");
        }
        eprintln!("Curator was present and compared");
    } else {
        assert!(report.curator_skipped.is_some(), "{report:?}");
        eprintln!("Curator is not installed here: skipped, as the report says");
    }
}

/// `--also-url` spreads the measuring loops over several instances: each of two instances
/// grants some of a parallel run's locks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_measuring_loops_are_spread_over_the_instances_given() {
    let first = Service::zk().await;
    let second = Service::zk().await;
    let mut args = BenchArgs::quick(first.base.clone(), zk::shared().connect_string());
    args.also_url = vec![second.base.clone()];
    args.scenarios = vec!["parallel".into()];
    args.clients = vec![4];
    let mut with_relay = args.clone();
    with_relay.relay_url = Some("http://127.0.0.1:9".into());
    let refused = run(with_relay)
        .await
        .expect_err("one relay beside two instances");
    assert!(refused.contains("--also-url"), "{refused}");
    run(args).await.expect("the benchmark runs");
    for service in [&first, &second] {
        let metrics = service.metrics().await;
        let grants = common::metric_value(&metrics, "lockwarden_grants_total");
        assert!(grants > 0, "{} granted nothing:\n{metrics}", service.base);
    }
}

/// The relay turns an acquire into one create and a release into one delete, answers as the
/// bench's client expects, refuses a name that is not one plain segment, and says when the
/// node is already there or already gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_creates_on_acquire_and_deletes_on_release() {
    let base = start_relay().await;
    let http = http_client();
    let name = format!("relay-{}", uuid::Uuid::new_v4().simple());
    let node = format!("/lockwarden-bench-relay/{name}");
    let zk = zkc::Client::connect(&zk::shared().connect_string())
        .await
        .unwrap();
    let post = |action: &str, lock: &str| {
        http.post(format!("{base}/v1/locks/{lock}/{action}"))
            .body("{}")
            .send()
    };

    let acquired = post("acquire", &name).await.unwrap();
    assert_eq!(acquired.status(), StatusCode::OK);
    let body: serde_json::Value = acquired.json().await.unwrap();
    assert_eq!(body["lease_id"], name.as_str());
    let (data, _) = zk
        .get_data(&node)
        .await
        .expect("the acquire created the node");
    assert_eq!(data.len(), 400, "as big as the floor's node");
    let again = post("acquire", &name).await.unwrap();
    assert_eq!(again.status(), StatusCode::CONFLICT);

    let released = post("release", &name).await.unwrap();
    assert_eq!(released.status(), StatusCode::OK);
    assert!(zk.check_stat(&node).await.unwrap().is_none(), "deleted");
    let again = post("release", &name).await.unwrap();
    assert_eq!(again.status(), StatusCode::NOT_FOUND);

    let nested = post("acquire", "a%2Fb").await.unwrap();
    assert_eq!(nested.status(), StatusCode::BAD_REQUEST);
}

/// `lockwarden bench-relay` as `scripts/bench` runs it: it refuses to listen off loopback; it
/// does not read the service's environment (a bad `LOCKWARDEN_*` variable once made it panic);
/// and it listens only once ZooKeeper has answered, so a caller who waits for its port finds
/// a relay that can serve, and one that cannot reach ZooKeeper exits with why, having never
/// listened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_binary_listens_on_loopback_only_once_zookeeper_answers() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    let relay = |listen: &str, zk: &str| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_lockwarden"));
        command
            .args(["bench-relay", "--listen", listen, "--zk", zk])
            .env("LOCKWARDEN_WORKER_THREADS", "0")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        command
    };
    /// Kills the relay however the test ends.
    struct Running(std::process::Child);
    impl Drop for Running {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let shared = zk::shared().connect_string();

    let refused = relay("0.0.0.0:8081", &shared).output().unwrap();
    assert_eq!(refused.status.code(), Some(2), "a usage error");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("not a loopback address"), "{said}");

    // ZooKeeper that is not there: the relay never listens, and says why it stopped.
    let port = zk::free_port();
    let dead_zk = format!("127.0.0.1:{}", zk::free_port());
    let mut child = Running(
        relay(&format!("127.0.0.1:{port}"), &dead_zk)
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
            "listening before ZooKeeper answered"
        );
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the relay neither served nor gave up"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mut said = String::new();
    std::io::Read::read_to_string(&mut child.0.stderr.take().unwrap(), &mut said).unwrap();
    assert_eq!(status.code(), Some(1), "{said}");
    assert!(said.contains("connecting to ZooKeeper"), "{said}");
    assert!(!said.contains("panicked"), "{said}");

    // The real ZooKeeper: once the port answers, so does the relay.
    let port = zk::free_port();
    let mut child = Running(
        relay(&format!("127.0.0.1:{port}"), &shared)
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(child.0.try_wait().unwrap().is_none(), "the relay stopped");
        assert!(Instant::now() < deadline, "the relay never listened");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let name = format!("relay-bin-{}", uuid::Uuid::new_v4().simple());
    let http = http_client();
    let post = |action: &str| {
        http.post(format!("http://127.0.0.1:{port}/v1/locks/{name}/{action}"))
            .body("{}")
            .send()
    };
    let acquired = post("acquire").await.unwrap();
    assert_eq!(
        acquired.status(),
        StatusCode::OK,
        "served at its first answer"
    );
    let released = post("release").await.unwrap();
    assert_eq!(
        released.status(),
        StatusCode::OK,
        "its node is not left behind"
    );
}

/// `--hint-url` measures an instance with a hint off against `--url` in the same rounds: one
/// row per instance, with its ratios to the one with every hint on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_hint_is_measured_against_its_switch() {
    let on = Service::zk().await;
    let off = Service::zk_with(|args| args.hints_off = vec![lockwarden::service::Hint::All]).await;
    let mut args = BenchArgs::quick(on.base.clone(), zk::shared().connect_string());
    args.scenarios = vec!["floor".into()];
    args.clients = vec![3];
    args.rounds = 2;
    (args.seconds, args.cycles, args.warmup) = (0.2, 10, 2);
    args.hint_url = vec![format!("all={}", off.base)];
    let report = run_report(args).await.expect("the benchmark runs");
    let offs: Vec<&str> = report.hints.iter().map(|f| f.off.as_str()).collect();
    assert_eq!(offs, ["none", "all"]);
    for figures in &report.hints {
        assert!(figures.contended_per_second > 0.0, "{figures:?}");
        assert!(figures.parallel_ratio > 0.0, "{figures:?}");
    }
}
