//! `lockwarden bench`: drives a running lockwarden over HTTP and prints a table and JSON.
//!
//! Every run also measures the raw ZooKeeper floor (create+delete through the same client
//! crate) in the same process, so ratios hold on a noisy machine, and reads ZooKeeper's
//! `mntr` counters around each scenario to report writes and reads per cycle.
//!
//! Given Curator's class path (`--curator-classpath`, as `scripts/bench` does when Java and
//! Debian's `libcurator-recipes-java` are present), it also measures Curator's
//! `InterProcessMutex` in the same run and gives every lockwarden figure as a ratio to
//! Curator's and to the floor's (the "yardstick").

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde::Serialize;

mod client;
mod curator;
mod floor;
mod hints;
mod latency;
mod memory;
mod permits;
mod refusal;
pub mod relay;
mod scenarios;
mod shapes;
mod stats;
mod throughput;
mod yardstick;

use yardstick::{median_spread, render, render_yardstick, uncontended_ratios};
pub use yardstick::{Ratio, RelayRatios};

#[derive(Clone, Debug, Args)]
pub struct BenchArgs {
    /// The lockwarden to drive.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// More instances of the same service (same ZooKeeper): the measuring loops of the
    /// parallel and contended scenarios are spread round-robin over `--url` and these, so a
    /// run measures what several instances give together (`scripts/bench-scale`).
    #[arg(long, value_delimiter = ',')]
    pub also_url: Vec<String>,
    /// The ZooKeeper it uses (host:port): for the floor and the server counters.
    #[arg(long)]
    pub zk: String,
    /// Measured cycles for the latency scenarios (after the warm-up).
    #[arg(long, default_value_t = 2000)]
    pub cycles: usize,
    /// Warm-up cycles before each latency scenario.
    #[arg(long, default_value_t = 500)]
    pub warmup: usize,
    /// Length of each throughput run, in seconds.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Client counts for the parallel, contended and semaphore scenarios.
    #[arg(long, value_delimiter = ',', default_value = "1,8,32")]
    pub clients: Vec<usize>,
    /// Which scenarios to run (`memory` and `shapes` are also available; not in the default).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "floor,uncontended,parallel,contended,semaphore,handoff,election-handoff,preempt,refusal"
    )]
    pub scenarios: Vec<String>,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// A bearer token, if the service needs one.
    #[arg(long)]
    pub token: Option<String>,
    /// Held locks for the `memory` scenario.
    #[arg(long, default_value_t = 100_000)]
    pub memory_locks: usize,
    /// Parked waiters for the `memory` scenario.
    #[arg(long, default_value_t = 1_000)]
    pub memory_waiters: usize,
    /// The service's process id, to report its resident memory (`memory` scenario).
    #[arg(long)]
    pub service_pid: Option<u32>,
    /// ZooKeeper's process id, to report its CPU time per operation (`shapes` scenario).
    #[arg(long)]
    pub zk_pid: Option<u32>,
    /// Interleaved rounds of every compared figure (uncontended, parallel, contended):
    /// lockwarden and Curator take turns with the floor (uncontended; parallel with the
    /// `floor` scenario) and the relay (uncontended and parallel), and the ratios are the
    /// median of the rounds' ratios (of an even count, the mean of the middle two).
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// The class path of `CuratorBench` and Curator's jars: measures Curator's
    /// InterProcessMutex in the same run. Without it, Curator is skipped with a note.
    #[arg(long, env = "LOCKWARDEN_BENCH_CURATOR_CLASSPATH")]
    pub curator_classpath: Option<String>,
    /// A bare HTTP relay to the same ZooKeeper (`lockwarden bench-relay`, which
    /// `scripts/bench` starts): measured in the same rounds as lockwarden in the uncontended
    /// and parallel figures: the floor of a service on lockwarden's HTTP stack (uncontended).
    #[arg(long)]
    pub relay_url: Option<String>,
    /// An instance with one performance hint off, as NAME=URL (`scripts/bench` with
    /// `HINTS=1` starts one per hint): each is measured against `--url`, with every hint
    /// on, in the `hints` figures, which run when any is given.
    #[arg(long)]
    pub hint_url: Vec<String>,
}

/// One line of results.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Row {
    pub scenario: String,
    pub clients: usize,
    pub operations: usize,
    pub p50_us: f64,
    pub p99_us: f64,
    pub per_second: f64,
    pub zk_writes_per_op: f64,
    pub zk_reads_per_op: f64,
    /// Scenario-specific notes (fairness, ratios to the floor, skips).
    pub note: String,
}

impl BenchArgs {
    /// A run small enough for a test: it checks the tool, not the numbers.
    pub fn quick(url: String, zk: String) -> BenchArgs {
        BenchArgs {
            url,
            also_url: Vec::new(),
            zk,
            cycles: 30,
            warmup: 5,
            seconds: 0.5,
            clients: vec![1, 4],
            scenarios: [
                "floor",
                "uncontended",
                "parallel",
                "contended",
                "handoff",
                "election-handoff",
                "semaphore",
                "preempt",
                "refusal",
                "memory",
                "shapes",
            ]
            .map(String::from)
            .to_vec(),
            json: None,
            token: None,
            memory_locks: 200,
            memory_waiters: 20,
            service_pid: None,
            zk_pid: None,
            rounds: 5,
            curator_classpath: None,
            relay_url: None,
            hint_url: Vec::new(),
        }
    }
}

impl Row {
    /// A row of `samples` (sorted in place for their percentiles), the rest left empty.
    pub fn of_samples(scenario: &str, clients: usize, samples: &mut [Duration]) -> Row {
        Row {
            scenario: scenario.into(),
            clients,
            operations: samples.len(),
            p50_us: stats::percentile(samples, 50.0),
            p99_us: stats::percentile(samples, 99.0),
            ..Row::default()
        }
    }
}

/// Everything a run measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    pub rows: Vec<Row>,
    pub yardstick: Vec<Ratio>,
    /// Why Curator is missing, if it is.
    pub curator_skipped: Option<String>,
    /// Why the HTTP relay is missing from the uncontended and parallel figures, if it is.
    pub relay_skipped: Option<String>,
    /// Each hint against its switch (`--hint-url`).
    pub hints: Vec<hints::HintFigures>,
}

/// Runs the chosen scenarios, prints the table and the JSON, and returns the rows.
pub async fn run(args: BenchArgs) -> Result<Vec<Row>, String> {
    run_report(args).await.map(|report| report.rows)
}

/// Runs the chosen scenarios, prints the tables and the JSON, and returns what it measured.
pub async fn run_report(args: BenchArgs) -> Result<Report, String> {
    if args.relay_url.is_some() && !args.also_url.is_empty() {
        // The relay is one process: beside several instances, lockwarden ÷ relay would
        // compare their sum with one of them.
        return Err("--relay-url measures one instance against one relay: leave out --also-url or --relay-url".into());
    }
    let bench = std::sync::Arc::new(scenarios::Bench::new(&args).await?);
    let mut report = Report::default();
    let rows = &mut report.rows;
    let wants = |name: &str| args.scenarios.iter().any(|s| s == name);
    let compared = ["uncontended", "parallel", "contended"]
        .iter()
        .any(|s| wants(s));
    let mut curator = match (&args.curator_classpath, compared) {
        (Some(classpath), true) => Some(curator::Curator::start(classpath, &args.zk).await?),
        (None, true) => {
            report.curator_skipped = Some(
                "no --curator-classpath (scripts/bench passes it when java, javac and Debian's libcurator-recipes-java are present)".into(),
            );
            None
        }
        _ => None,
    };
    if args.relay_url.is_none() && (wants("uncontended") || wants("parallel")) {
        report.relay_skipped = Some(
            "no --relay-url (`lockwarden bench-relay` is one; scripts/bench starts it unless RELAY=0)".into(),
        );
    }
    let floor = bench.floor_sequential().await?;
    let floor_p50 = floor.p50_us;
    let floor_p99 = floor.p99_us;
    let floor_rate = floor.per_second;
    if wants("floor") {
        rows.push(floor);
        // With the parallel figures, their floor is measured in each of their rounds.
        if !wants("parallel") {
            for &c in &args.clients {
                rows.push(bench.floor_parallel(c, window(&args)).await?);
            }
        }
    }
    if wants("uncontended") {
        let mut u = bench.uncontended(curator.as_mut()).await?;
        let paired = &u.floor;
        let ratios = format!(
            "p50 {:.2}× and p99 {:.2}× the interleaved floor's; {:.2}× and {:.2}× the first floor's",
            u.cycle.p50_us / paired.p50_us,
            u.cycle.p99_us / paired.p99_us,
            u.cycle.p50_us / floor_p50,
            u.cycle.p99_us / floor_p99
        );
        u.cycle.note = stats::joined(&ratios, &u.cycle.note);
        report.yardstick.extend(uncontended_ratios(&u));
        rows.push(u.floor);
        rows.push(u.cycle);
        rows.extend(u.curator);
        rows.extend(u.relay);
    }
    for (name, shared) in [("parallel", false), ("contended", true)] {
        if !wants(name) {
            continue;
        }
        for &c in &args.clients {
            let floor = if shared {
                throughput::Floor::Fixed {
                    rate: floor_rate,
                    what: "sequential create+delete cycles",
                }
            } else if wants("floor") {
                throughput::Floor::Parallel
            } else {
                throughput::Floor::Fixed {
                    rate: floor_rate,
                    what: "sequential create+delete cycles (the parallel floor was not run)",
                }
            };
            let compared = throughput::compare(&bench, curator.as_mut(), shared, c, floor).await?;
            report.yardstick.push(compared.ratio);
            rows.extend(compared.rows);
        }
    }
    if let Some(curator) = curator {
        curator.quit().await;
    }
    if !args.hint_url.is_empty() {
        report.hints = hints::hints(&args).await?;
    }
    if wants("shapes") {
        for &c in &args.clients {
            rows.extend(bench.shapes(c, window(&args)).await?);
        }
    }
    if wants("semaphore") {
        rows.extend(bench.semaphore_cycle(SEMAPHORE_PERMITS).await?);
        for &c in &args.clients {
            rows.push(bench.semaphore(c, SEMAPHORE_PERMITS, window(&args)).await?);
        }
    }
    if wants("handoff") {
        rows.push(bench.handoff(false).await?);
    }
    if wants("election-handoff") {
        rows.push(bench.handoff(true).await?);
    }
    if wants("preempt") {
        rows.push(bench.preempt().await?);
    }
    if wants("refusal") {
        rows.extend(bench.refusal().await?);
    }
    if wants("memory") {
        rows.extend(
            bench
                .memory(args.memory_locks, args.memory_waiters, args.service_pid)
                .await?,
        );
    }
    println!("{}", render(&report.rows));
    if !report.yardstick.is_empty() {
        println!("{}", render_yardstick(&report));
    }
    if !report.hints.is_empty() {
        let clients = args.clients.iter().copied().max().unwrap_or(1);
        println!("{}", hints::render_hints(&report.hints, clients));
    }
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    println!("{json}");
    if let Some(path) = &args.json {
        std::fs::write(path, &json).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    Ok(report)
}

/// The permits of the `semaphore` scenario's semaphore.
const SEMAPHORE_PERMITS: u32 = 8;

/// Time between a start and each scenario's end, for throughput runs.
fn window(args: &BenchArgs) -> Duration {
    Duration::from_secs_f64(args.seconds.max(0.1))
}

/// The warm-up before a throughput window: a fifth of it, within 0.1–2 s.
fn warm_up(window: Duration) -> Duration {
    Duration::from_secs_f64((window.as_secs_f64() / 5.0).clamp(0.1, 2.0))
}
