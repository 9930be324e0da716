//! `lockwarden bench`: drives a running lockwarden over HTTP and prints a table and JSON.
//!
//! Every run also measures the raw ZooKeeper floor (create+delete through the same client
//! crate) in the same process, so ratios hold on a noisy machine, and reads ZooKeeper's
//! `mntr` counters around each scenario to report writes and reads per cycle.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde::Serialize;

mod client;
mod floor;
mod latency;
mod memory;
mod scenarios;
mod stats;

#[derive(Clone, Debug, Args)]
pub struct BenchArgs {
    /// The lockwarden to drive.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
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
    /// Client counts for the parallel and contended scenarios.
    #[arg(long, value_delimiter = ',', default_value = "1,8,32")]
    pub clients: Vec<usize>,
    /// Which scenarios to run (`memory` is also available; it is slow and not in the default).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "floor,uncontended,parallel,contended,handoff,preempt"
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
                "preempt",
                "memory",
            ]
            .map(String::from)
            .to_vec(),
            json: None,
            token: None,
            memory_locks: 200,
            memory_waiters: 20,
            service_pid: None,
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

fn render(rows: &[Row]) -> String {
    let mut out = String::from(
        "| scenario | C | ops | p50 µs | p99 µs | per s | ZK writes/op | ZK reads/op | note |\n|---|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {:.0} | {:.0} | {:.0} | {:.2} | {:.2} | {} |\n",
            r.scenario,
            r.clients,
            r.operations,
            r.p50_us,
            r.p99_us,
            r.per_second,
            r.zk_writes_per_op,
            r.zk_reads_per_op,
            r.note
        ));
    }
    out
}

/// Runs the chosen scenarios, prints the table and the JSON, and returns the rows.
pub async fn run(args: BenchArgs) -> Result<Vec<Row>, String> {
    let bench = std::sync::Arc::new(scenarios::Bench::new(&args).await?);
    let mut rows = Vec::new();
    let wants = |name: &str| args.scenarios.iter().any(|s| s == name);
    let floor = bench.floor_sequential().await?;
    let floor_p50 = floor.p50_us;
    let floor_p99 = floor.p99_us;
    if wants("floor") {
        rows.push(floor);
        for &c in &args.clients {
            rows.push(bench.floor_parallel(c).await?);
        }
    }
    if wants("uncontended") {
        let (mut row, paired) = bench.uncontended().await?;
        row.note = format!(
            "p50 {:.2}× and p99 {:.2}× the interleaved floor's; {:.2}× and {:.2}× the first floor's",
            row.p50_us / paired.p50_us,
            row.p99_us / paired.p99_us,
            row.p50_us / floor_p50,
            row.p99_us / floor_p99
        );
        rows.push(paired);
        rows.push(row);
    }
    if wants("parallel") {
        for &c in &args.clients {
            rows.push(bench.parallel(c).await?);
        }
    }
    if wants("contended") {
        for &c in &args.clients {
            rows.push(bench.contended(c).await?);
        }
    }
    if wants("handoff") {
        rows.push(bench.handoff().await?);
    }
    if wants("preempt") {
        rows.push(bench.preempt().await?);
    }
    if wants("memory") {
        rows.extend(
            bench
                .memory(args.memory_locks, args.memory_waiters, args.service_pid)
                .await?,
        );
    }
    println!("{}", render(&rows));
    let json = serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?;
    println!("{json}");
    if let Some(path) = &args.json {
        std::fs::write(path, &json).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    Ok(rows)
}

/// Time between a start and each scenario's end, for throughput runs.
fn window(args: &BenchArgs) -> Duration {
    Duration::from_secs_f64(args.seconds.max(0.1))
}
