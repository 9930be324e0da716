//! The `hints` scenario: every performance hint measured against its switch, in one run.
//!
//! `scripts/bench` with `HINTS=1` starts, beside the service, one instance per hint with
//! that hint off (`serve --hints-off NAME`) on the same ZooKeeper, and names each with
//! `--hint-url NAME=URL`. In interleaved rounds, starting with a different instance every
//! round, each instance (the one with every hint on included) gets one batch of uncontended
//! cycles, one window of the contended figure (one lock) and one of the parallel figure
//! (a lock each), both at the largest `--clients`. Each figure is the median of the rounds,
//! and each ratio the median of the rounds' ratios to the instance with every hint on.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::scenarios::Bench;
use super::stats::percentile;
use super::{median_spread, BenchArgs};

/// One instance's figures, and their ratios to the instance with every hint on.
#[derive(Clone, Debug, Default, Serialize)]
pub struct HintFigures {
    /// The hint turned off (`none`: every hint on).
    pub off: String,
    pub uncontended_p50_us: f64,
    pub contended_per_second: f64,
    pub zk_writes_per_handoff: f64,
    pub zk_reads_per_handoff: f64,
    pub parallel_per_second: f64,
    /// p50 ÷ all on's (lower is better for the hint's absence).
    pub uncontended_ratio: f64,
    pub contended_ratio: f64,
    pub parallel_ratio: f64,
}

/// What one round measured on one instance.
#[derive(Clone, Copy, Default)]
struct Round {
    p50_us: f64,
    contended: f64,
    writes: f64,
    reads: f64,
    parallel: f64,
}

/// Measures every instance (`all on` first, then `--hint-url`s) in interleaved rounds.
pub(super) async fn hints(args: &BenchArgs) -> Result<Vec<HintFigures>, String> {
    let mut instances = vec![("none".to_string(), Arc::new(Bench::new(args).await?))];
    for named in &args.hint_url {
        let (off, url) = named
            .split_once('=')
            .ok_or_else(|| format!("--hint-url {named}: expected NAME=URL"))?;
        let args = BenchArgs {
            url: url.to_string(),
            also_url: Vec::new(),
            ..args.clone()
        };
        instances.push((off.to_string(), Arc::new(Bench::new(&args).await?)));
    }
    let rounds = args.rounds.max(1);
    let clients = args.clients.iter().copied().max().unwrap_or(1);
    let window = Duration::from_secs_f64((args.seconds / rounds as f64).max(0.1));
    let batch = args.cycles.div_ceil(rounds).max(1);
    for (_, bench) in &instances {
        let mut client = bench.client("hints-u", "bench", None).await?;
        for _ in 0..args.warmup {
            client.cycle().await?;
        }
        // Unmeasured windows first, so that no instance starts its rounds cold.
        bench.contended(clients, window).await?;
        bench.parallel(clients, window).await?;
    }
    let n = instances.len();
    let mut measured = vec![Vec::<Round>::new(); n];
    for round in 0..rounds {
        for turn in 0..n {
            let i = (round + turn) % n;
            let bench = &instances[i].1;
            // A connection of its own each turn: one left idle while the other instances
            // take their turns would outlast the service's read timeout and be closed.
            let mut client = bench.client("hints-u", "bench", None).await?;
            client.cycle().await?;
            let mut samples = Vec::with_capacity(batch);
            for _ in 0..batch {
                let started = Instant::now();
                client.cycle().await?;
                samples.push(started.elapsed());
            }
            let contended = bench.contended(clients, window).await?;
            let parallel = bench.parallel(clients, window).await?;
            measured[i].push(Round {
                p50_us: percentile(&mut samples, 50.0),
                contended: contended.per_second,
                writes: contended.zk_writes_per_op,
                reads: contended.zk_reads_per_op,
                parallel: parallel.per_second,
            });
        }
    }
    let median = |rounds: &[Round], pick: fn(&Round) -> f64| {
        median_spread(rounds.iter().map(pick).collect()).0
    };
    let ratio = |ours: &[Round], base: &[Round], pick: fn(&Round) -> f64| {
        median_spread(
            ours.iter()
                .zip(base)
                .map(|(o, b)| pick(o) / pick(b))
                .collect(),
        )
        .0
    };
    let base = &measured[0];
    Ok(instances
        .iter()
        .zip(&measured)
        .map(|((off, _), ours)| HintFigures {
            off: off.clone(),
            uncontended_p50_us: median(ours, |r| r.p50_us),
            contended_per_second: median(ours, |r| r.contended),
            zk_writes_per_handoff: median(ours, |r| r.writes),
            zk_reads_per_handoff: median(ours, |r| r.reads),
            parallel_per_second: median(ours, |r| r.parallel),
            uncontended_ratio: ratio(ours, base, |r| r.p50_us),
            contended_ratio: ratio(ours, base, |r| r.contended),
            parallel_ratio: ratio(ours, base, |r| r.parallel),
        })
        .collect())
}

/// The table of the `hints` scenario.
pub(super) fn render_hints(figures: &[HintFigures], clients: usize) -> String {
    let mut out = format!(
        "| hint off | uncontended p50 µs | × all on | contended C={clients} /s | × all on | ZK writes/hand-off | ZK reads/hand-off | parallel C={clients} /s | × all on |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    );
    for f in figures {
        out.push_str(&format!(
            "| {} | {:.0} | {:.2} | {:.0} | {:.2} | {:.2} | {:.2} | {:.0} | {:.2} |\n",
            f.off,
            f.uncontended_p50_us,
            f.uncontended_ratio,
            f.contended_per_second,
            f.contended_ratio,
            f.zk_writes_per_handoff,
            f.zk_reads_per_handoff,
            f.parallel_per_second,
            f.parallel_ratio
        ));
    }
    out
}
