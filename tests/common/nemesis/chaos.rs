//! A chaos run: the workload of `history` against the cluster while the nemesis injects
//! faults, then the checks of what it recorded, liveness and garbage, in a [`ChaosOutcome`].

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use super::{inject, Cluster, Fault, Injection, GC_DELAY_MS, SKEW_MS};
use crate::common::history::check::{check, CheckConfig, Report};
use crate::common::history::workload::{liveness_probe, Workload, WorkloadConfig};
use crate::common::history::{History, Kinds};
use crate::common::metric_value;

/// What a chaos run found.
pub struct ChaosOutcome {
    pub logs: std::path::PathBuf,
    pub report: Report,
    pub injections: Vec<Injection>,
    pub liveness_failures: Vec<String>,
    pub garbage: Vec<String>,
    pub history: History,
    /// Queue entries the instances made (with a hand-off, alone), from their `/metrics` at
    /// the end (an instance restarted during the run counts from its restart).
    pub joins: (u64, u64),
    /// Record writes sent in shared multis and alone (`store::zk::batch`).
    pub record_writes: (u64, u64),
    /// After a run that is not clean: the znodes whose copies differ between the ZooKeeper
    /// nodes (`evidence.rs`).
    pub differing: Vec<String>,
    /// Which of the workload's names are semaphores and elections.
    pub kinds: Kinds,
}

impl ChaosOutcome {
    pub fn is_clean(&self) -> bool {
        self.report.is_clean() && self.liveness_failures.is_empty() && self.garbage.is_empty()
    }

    /// Per kind of name (lock, semaphore, election), how many ops ended how: `"campaign
    /// 200"`, `"renew 409 not_leader"`, … (an election's calls by the election's words).
    pub fn outcomes_by_kind(&self) -> BTreeMap<&'static str, BTreeMap<String, usize>> {
        let mut by: BTreeMap<&'static str, BTreeMap<String, usize>> = BTreeMap::new();
        for op in &self.history.ops {
            let (kind, call) = if self.kinds.is_election(&op.lock) {
                let call = match op.call.kind() {
                    "acquire" => "campaign",
                    "release" => "resign",
                    other => other,
                };
                ("election", call)
            } else if self.kinds.is_semaphore(&op.lock) {
                ("semaphore", op.call.kind())
            } else {
                ("lock", op.call.kind())
            };
            let key = format!("{call} {}", op.outcome.label());
            *by.entry(kind).or_default().entry(key).or_default() += 1;
        }
        by
    }

    /// Seconds of 503 (or no answer) per fault: the span from the fault's start to the
    /// last failed call before it recovered, summed per fault kind.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{}", self.report);
        for (kind, outcomes) in self.outcomes_by_kind() {
            let total: usize = outcomes.values().sum();
            let counts: Vec<String> = outcomes.iter().map(|(k, n)| format!("{k}: {n}")).collect();
            let _ = writeln!(out, "{kind} ops {total}: {}", counts.join(", "));
        }
        let mut per: BTreeMap<Fault, (usize, f64, f64, f64)> = BTreeMap::new();
        for injection in &self.injections {
            let end = injection.healed_ms + injection.recovered_ms.unwrap_or(30_000);
            let unavailable = self
                .history
                .ops
                .iter()
                .filter(|op| op.invoke_ms >= injection.start_ms && op.invoke_ms <= end)
                .filter(|op| op.outcome.status == Some(503) || op.outcome.is_unknown())
                .map(|op| op.complete_ms)
                .max()
                .map_or(0.0, |last| {
                    (last - injection.start_ms).max(0) as f64 / 1000.0
                });
            let entry = per.entry(injection.fault).or_default();
            entry.0 += 1;
            entry.1 += unavailable;
            let recovery = injection
                .recovered_ms
                .map_or(f64::NAN, |ms| ms as f64 / 1000.0);
            entry.2 = entry.2.max(recovery);
            entry.3 += (injection.healed_ms - injection.start_ms) as f64 / 1000.0;
        }
        let _ = writeln!(
            out,
            "{:<18} {:>6} {:>10} {:>16} {:>18}",
            "fault", "count", "held s", "503/no-answer s", "max recovery s"
        );
        for (fault, (count, unavailable, recovery, held)) in per {
            let _ = writeln!(
                out,
                "{:<18} {count:>6} {held:>10.1} {unavailable:>16.1} {recovery:>18.1}",
                format!("{fault:?}")
            );
        }
        let _ = writeln!(out, "liveness failures: {:?}", self.liveness_failures);
        let _ = writeln!(out, "garbage left: {:?}", self.garbage);
        let _ = writeln!(
            out,
            "queue joins: {} with a hand-off, {} alone",
            self.joins.0, self.joins.1
        );
        let _ = writeln!(
            out,
            "record writes: {} in shared multis, {} alone",
            self.record_writes.0, self.record_writes.1
        );
        for line in &self.differing {
            let _ = writeln!(out, "copies differ: {line}");
        }
        let _ = writeln!(out, "instance logs: {}", self.logs.display());
        out
    }
}

/// Runs the workload for `duration` while the nemesis injects `faults` (dealt by `seed`,
/// one at a time with calm gaps), then checks the history, liveness and garbage. The run
/// holds the busy turn until the liveness probe is done.
pub async fn run(faults: &[Fault], duration: Duration, seed: u64, clients: usize) -> ChaosOutcome {
    let turn = super::busy_turn().await;
    let mut rng = fastrand::Rng::with_seed(seed);
    // Instance 1's clock runs ahead for an even seed, behind for an odd one.
    let skew = if seed % 2 == 0 { SKEW_MS } else { -SKEW_MS };
    let mut cluster = Cluster::start(3, skew).await;
    let mut config = WorkloadConfig::new(cluster.urls());
    config.clients = clients;
    config.seed = seed;
    config.duration = duration;
    config.prefix = "chaos".into();
    // Two per instance, so that joins ride on hand-offs under the faults too.
    config.hot_clients = 6;
    config.http_timeout = Duration::from_secs(4);
    config.semaphores = 1;
    config.elections = 1;
    let locks = config.lock_names();
    let kinds = config.kinds();
    let workload = tokio::spawn(Workload::run(config));
    let started = Instant::now();
    let mut injections = Vec::new();
    // Calm first, so the history has a baseline; stop injecting well before the end.
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Dealt from a shuffled deck: every fault once before any twice, so that even a short
    // run covers the breadth it can fit.
    let mut deck = Vec::new();
    while !faults.is_empty() && started.elapsed() + Duration::from_secs(12) < duration {
        if deck.is_empty() {
            deck = faults.to_vec();
            rng.shuffle(&mut deck);
        }
        let fault = deck.pop().expect("a dealt fault");
        let target = rng.usize(..cluster.instances.len());
        let hold = Duration::from_millis(rng.u64(2000..6000));
        injections.push(inject(&mut cluster, fault, target, hold).await);
        tokio::time::sleep(Duration::from_millis(rng.u64(500..2500))).await;
    }
    let history = workload.await.expect("the workload task");
    let liveness_failures =
        liveness_probe(&cluster.urls(), &locks, &kinds, Duration::from_secs(30)).await;
    drop(turn);
    let report = check(
        &history,
        &CheckConfig {
            tolerance_ms: 50,
            renew_margin_ms: 200,
            max_skew_ms: super::MAX_SKEW_MS as i64,
            ..CheckConfig::with_offsets(cluster.offsets.clone())
        },
    );
    // Two collector delays after the last release, and a margin; poll until clean.
    let deadline = Instant::now() + Duration::from_millis(2 * GC_DELAY_MS + 15_000);
    let mut garbage = cluster.garbage().await;
    while !garbage.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
        garbage = cluster.garbage().await;
    }
    let urls = cluster.urls();
    let joins = summed(&urls, "lockwarden_queue_joins_total", ["hand_off", "alone"]).await;
    let writes = ["shared", "alone"];
    let record_writes = summed(&urls, "lockwarden_zookeeper_record_writes_total", writes).await;
    let clean = report.is_clean() && liveness_failures.is_empty() && garbage.is_empty();
    let differing = if clean {
        Vec::new()
    } else {
        super::evidence::keep(&cluster).await
    };
    ChaosOutcome {
        kinds,
        differing,
        joins,
        record_writes,
        logs: cluster.logs.clone(),
        report,
        injections,
        liveness_failures,
        garbage,
        history,
    }
}

/// The instances' counters `family{how="..."}` for each of `hows`, summed (instances
/// restarted during the run count only since their restart).
async fn summed(urls: &[String], family: &str, hows: [&str; 2]) -> (u64, u64) {
    let http = crate::common::http_client();
    let mut sums = (0, 0);
    for url in urls {
        let Ok(answer) = http.get(format!("{url}/metrics")).send().await else {
            continue;
        };
        let text = answer.text().await.unwrap_or_default();
        let count = |how: &str| metric_value(&text, &format!("{family}{{how=\"{how}\"}}"));
        sums.0 += count(hows[0]);
        sums.1 += count(hows[1]);
    }
    sums
}
