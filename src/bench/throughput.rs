//! The yardstick's throughput figures (parallel and contended), measured in interleaved
//! rounds: each round gives lockwarden, Curator and (for the parallel figure) the raw floor
//! and the HTTP relay one short window each, starting with a different side every round, so
//! that a machine that gets busier or quieter during the run moves every side alike. The
//! ratios reported are the median of the rounds' ratios, with their lowest and highest, as
//! for the uncontended cycle. The parallel floor takes its turn only when the `floor`
//! scenario runs; otherwise the sequential floor measured first stands in for it. The rounds
//! share the `--seconds` of a figure. Before them every side runs one window that is not
//! counted (a warm-up), so a figure takes one round longer than its `--seconds`.

use std::sync::Arc;
use std::time::Duration;

use super::curator::Curator;
use super::scenarios::Bench;
use super::{median_spread, Ratio, RelayRatios, Row};

/// What a throughput figure is compared with, besides Curator.
pub(super) enum Floor {
    /// The raw create+delete pairs/s with as many in flight as lockwarden has clients,
    /// measured in each round.
    Parallel,
    /// One rate measured before (the sequential create+delete cycles: one lock's
    /// hand-offs are serial like them).
    Fixed { rate: f64, what: &'static str },
}

/// What the rounds of one figure measured, and how it compares.
pub(super) struct Compared {
    /// lockwarden's row, Curator's and the floor's (when measured in the rounds), each from
    /// its median round.
    pub rows: Vec<Row>,
    pub ratio: Ratio,
}

#[derive(Clone, Copy)]
enum Side {
    Floor,
    Lockwarden,
    Curator,
    /// The bare HTTP relay (`--relay-url`): parallel figures only, since it does not wait.
    Relay,
}

/// Measures one figure (`shared`: the contended one, else the parallel one) with `clients`.
pub(super) async fn compare(
    bench: &Arc<Bench>,
    mut curator: Option<&mut Curator>,
    shared: bool,
    clients: usize,
    floor: Floor,
) -> Result<Compared, String> {
    let args = &bench.args;
    let rounds = args.rounds.max(1);
    let window = Duration::from_secs_f64((args.seconds / rounds as f64).max(0.1));
    let mut sides = vec![Side::Lockwarden];
    if curator.is_some() {
        sides.push(Side::Curator);
    }
    if matches!(floor, Floor::Parallel) {
        sides.push(Side::Floor);
    }
    if !shared && args.relay_url.is_some() {
        sides.push(Side::Relay);
    }
    // One window per side first, not counted, so that every side starts its counted rounds
    // warm whatever ran before this figure: Curator's JIT above all. Without it, a figure run
    // alone would meet a colder Curator than in a full run, where the figures before it warm
    // Curator up, and its ratio would depend on what ran before.
    for &side in &sides {
        one_window(bench, curator.as_deref_mut(), side, shared, clients, window).await?;
    }
    let (mut ours, mut theirs, mut floors, mut relays) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        for turn in 0..sides.len() {
            let side = sides[(round + turn) % sides.len()];
            let row = one_window(bench, curator.as_deref_mut(), side, shared, clients, window);
            match (side, row.await?) {
                (_, None) => {}
                (Side::Lockwarden, Some(row)) => ours.push(row),
                (Side::Curator, Some(row)) => theirs.push(row),
                (Side::Floor, Some(row)) => floors.push(row),
                (Side::Relay, Some(row)) => relays.push(row),
            }
        }
    }
    let floor_rates: Vec<f64> = match &floor {
        Floor::Parallel => floors.iter().map(|r| r.per_second).collect(),
        Floor::Fixed { rate, .. } => vec![*rate; ours.len()],
    };
    let rate = |rows: &[Row]| rows.iter().map(|r| r.per_second).collect::<Vec<_>>();
    let to_floor = median_spread(
        ours.iter()
            .zip(&floor_rates)
            .map(|(o, f)| o.per_second / f)
            .collect(),
    );
    let to_curator = (!theirs.is_empty()).then(|| {
        median_spread(
            ours.iter()
                .zip(&theirs)
                .map(|(o, t)| o.per_second / t.per_second)
                .collect(),
        )
    });
    let relay_rounds: Vec<(f64, f64)> = ours
        .iter()
        .zip(&relays)
        .map(|(o, r)| (o.per_second, r.per_second))
        .collect();
    // The relay is compared only with a floor of its own shape (C in flight, same rounds).
    let relay_floors = matches!(floor, Floor::Parallel).then_some(floor_rates.as_slice());
    let relay = RelayRatios::of_rounds(&relay_rounds, relay_floors);
    let figure = if shared {
        format!("contended C={clients}, one lock: hand-offs")
    } else {
        format!("parallel C={clients}, own locks: acquire+release pairs")
    };
    let floor_is = floor_name(&floor, clients);
    let ratio = Ratio {
        figure,
        unit: "/s".into(),
        lockwarden: median_spread(rate(&ours)).0,
        curator: (!theirs.is_empty()).then(|| median_spread(rate(&theirs)).0),
        floor: median_spread(floor_rates).0,
        to_curator: to_curator.map(|(median, _)| median),
        to_curator_spread: to_curator.map(|(_, spread)| spread),
        to_floor: to_floor.0,
        to_floor_spread: Some(to_floor.1),
        relay,
        note: format!(
            "ratios: median (min–max) of {rounds} interleaved rounds of {:.1} s; floor: {floor_is}; higher is better",
            window.as_secs_f64()
        ),
    };
    let mut rows = vec![median_round(ours, rounds)];
    rows.extend((!theirs.is_empty()).then(|| median_round(theirs, rounds)));
    rows.extend((!floors.is_empty()).then(|| median_round(floors, rounds)));
    rows.extend((!relays.is_empty()).then(|| median_round(relays, rounds)));
    Ok(Compared { rows, ratio })
}

/// One side's window of one figure; `None` for Curator when it is not measured.
async fn one_window(
    bench: &Arc<Bench>,
    curator: Option<&mut Curator>,
    side: Side,
    shared: bool,
    clients: usize,
    window: Duration,
) -> Result<Option<Row>, String> {
    Ok(match side {
        Side::Lockwarden if shared => Some(bench.contended(clients, window).await?),
        Side::Lockwarden => Some(bench.parallel(clients, window).await?),
        Side::Curator => match curator {
            Some(curator) => {
                let warm = super::warm_up(window).as_secs_f64();
                let seconds = window.as_secs_f64();
                Some(curator.timed(shared, clients, warm, seconds).await?)
            }
            None => None,
        },
        Side::Floor => Some(bench.floor_parallel(clients, window).await?),
        Side::Relay => Some(bench.relay_parallel(clients, window).await?),
    })
}

fn floor_name(floor: &Floor, clients: usize) -> String {
    match floor {
        Floor::Parallel => format!("create+delete pairs, {clients} in flight, in each round"),
        Floor::Fixed { what, .. } => (*what).to_string(),
    }
}

/// The row of the round whose rate is the median, noting the rounds' range. Of an even count
/// it is the lower middle round, since a row is one round's; the yardstick's figures take the
/// mean of the middle two (`median_spread`).
fn median_round(mut rows: Vec<Row>, rounds: usize) -> Row {
    rows.sort_by(|a, b| a.per_second.total_cmp(&b.per_second));
    let (low, high) = (rows[0].per_second, rows[rows.len() - 1].per_second);
    let mut median = rows.swap_remove((rows.len() - 1) / 2);
    let range = format!("the median of {rounds} rounds (per s {low:.0}–{high:.0})");
    median.note = if median.note.is_empty() {
        range
    } else {
        format!("{range}; {}", median.note)
    };
    median
}
