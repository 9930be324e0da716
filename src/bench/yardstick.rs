//! The yardstick: every compared lockwarden figure beside Curator's, the raw floor's and the
//! bare HTTP relay's (`relay`), each as the median of the rounds' ratios with their spread,
//! and the table that prints them.
//!
//! Three yardsticks, because each answers another question. Curator: is lockwarden faster
//! than the lock recipe people use today? The raw floor (create+delete in the bench's own
//! process): how close is it to what ZooKeeper itself allows? The relay (the floor's two
//! writes behind lockwarden's own HTTP stack, with no lock logic): how much of the gap to the
//! floor is the HTTP hop between two processes on that stack, and how much is lockwarden's
//! own work?
//!
//! Every ratio here is the median of the rounds' ratios, and for an even count of rounds the
//! mean of the middle two ([`median_spread`]). So are the throughput figures; a throughput
//! row of the results table is one whole round, the lower middle one of an even count, so its
//! figure can differ a little from the yardstick's. The uncontended figures (lockwarden's,
//! Curator's, the floor's and the relay's p50 and p99) are over all of their cycles, like
//! their rows.

use serde::Serialize;

use super::floor::{Round, Uncontended};
use super::{Report, Row};

/// One lockwarden figure beside Curator's and the floor's, and the ratios.
#[derive(Clone, Debug, Serialize)]
pub struct Ratio {
    pub figure: String,
    pub unit: String,
    pub lockwarden: f64,
    pub curator: Option<f64>,
    pub floor: f64,
    /// lockwarden ÷ Curator (for the uncontended cycle, the median of the rounds' ratios).
    pub to_curator: Option<f64>,
    /// The rounds' lowest and highest lockwarden ÷ Curator (uncontended cycle only).
    pub to_curator_spread: Option<(f64, f64)>,
    /// lockwarden ÷ floor (for the uncontended cycle, the median of the rounds' ratios).
    pub to_floor: f64,
    pub to_floor_spread: Option<(f64, f64)>,
    /// The relay's figure and the ratios to it, when a relay was measured (`--relay-url`).
    pub relay: Option<RelayRatios>,
    pub note: String,
}

/// A figure of the bare HTTP relay (`lockwarden bench-relay`), measured in the same rounds.
#[derive(Clone, Debug, Serialize)]
pub struct RelayRatios {
    /// The relay's own figure: for throughput, the median of the rounds' (of an even count,
    /// the mean of the middle two); for the uncontended cycle, over all of its cycles.
    pub relay: f64,
    /// lockwarden ÷ the relay: lockwarden's own work (median of the rounds, and spread).
    pub to_relay: f64,
    pub to_relay_spread: (f64, f64),
    /// The relay ÷ the floor: what the HTTP hop alone costs (median of the rounds, spread).
    /// `None` when no floor of the same shape was measured in the rounds: a parallel figure
    /// without the `floor` scenario has only the sequential floor, and the relay's C clients
    /// against one sequential caller would say nothing about the hop.
    pub relay_to_floor: Option<f64>,
    pub relay_to_floor_spread: Option<(f64, f64)>,
}

impl RelayRatios {
    /// From the rounds' (lockwarden, relay) figures, in the same unit, and the floor of each
    /// round when one of the same shape was measured in them.
    pub(super) fn of_rounds(rounds: &[(f64, f64)], floors: Option<&[f64]>) -> Option<RelayRatios> {
        if rounds.is_empty() {
            return None;
        }
        let (to_relay, to_relay_spread) =
            median_spread(rounds.iter().map(|(ours, relay)| ours / relay).collect());
        let to_floor = floors.map(|floors| {
            median_spread(
                rounds
                    .iter()
                    .zip(floors)
                    .map(|((_, relay), floor)| relay / floor)
                    .collect(),
            )
        });
        Some(RelayRatios {
            relay: median_spread(rounds.iter().map(|(_, relay)| *relay).collect()).0,
            to_relay,
            to_relay_spread,
            relay_to_floor: to_floor.map(|(median, _)| median),
            relay_to_floor_spread: to_floor.map(|(_, spread)| spread),
        })
    }
}

/// The table of every row.
pub(super) fn render(rows: &[Row]) -> String {
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

pub(super) fn render_yardstick(report: &Report) -> String {
    let mut out = String::from(
        "| figure | lockwarden | Curator | floor | HTTP relay | lockwarden ÷ Curator | lockwarden ÷ floor | lockwarden ÷ relay | relay ÷ floor | note |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    let ratio = |r: Option<f64>, spread: Option<(f64, f64)>| match (r, spread) {
        (Some(r), Some((lo, hi))) => format!("{r:.2}× ({lo:.2}–{hi:.2})"),
        (Some(r), None) => format!("{r:.2}×"),
        (None, _) => "–".into(),
    };
    for r in &report.yardstick {
        let relay = r.relay.as_ref();
        out.push_str(&format!(
            "| {} | {:.0} {} | {} | {:.0} | {} | {} | {} | {} | {} | {} |\n",
            r.figure,
            r.lockwarden,
            r.unit,
            r.curator.map_or("–".into(), |c| format!("{c:.0}")),
            r.floor,
            relay.map_or("–".into(), |x| format!("{:.0}", x.relay)),
            ratio(r.to_curator, r.to_curator_spread),
            ratio(Some(r.to_floor), r.to_floor_spread),
            ratio(relay.map(|x| x.to_relay), relay.map(|x| x.to_relay_spread)),
            ratio(
                relay.and_then(|x| x.relay_to_floor),
                relay.and_then(|x| x.relay_to_floor_spread)
            ),
            r.note
        ));
    }
    if let Some(why) = &report.curator_skipped {
        out.push_str(&format!("\nCurator skipped: {why}\n"));
    }
    if let Some(why) = &report.relay_skipped {
        out.push_str(&format!("\nHTTP relay skipped: {why}\n"));
    }
    out
}

/// The median of the rounds' ratios and their lowest and highest.
pub(super) fn median_spread(mut ratios: Vec<f64>) -> (f64, (f64, f64)) {
    ratios.retain(|r| r.is_finite());
    if ratios.is_empty() {
        return (f64::NAN, (f64::NAN, f64::NAN));
    }
    ratios.sort_by(f64::total_cmp);
    let n = ratios.len();
    let median = if n % 2 == 1 {
        ratios[n / 2]
    } else {
        (ratios[n / 2 - 1] + ratios[n / 2]) / 2.0
    };
    (median, (ratios[0], ratios[n - 1]))
}

/// The uncontended figures (p50 and p99) beside Curator's, the floor's and the relay's.
pub(super) fn uncontended_ratios(u: &Uncontended) -> Vec<Ratio> {
    let pick = |p: (f64, f64), p99: bool| if p99 { p.1 } else { p.0 };
    [false, true]
        .into_iter()
        .map(|p99| {
            let (to_floor, floor_spread) = median_spread(
                u.rounds
                    .iter()
                    .map(|r| pick(r.lockwarden, p99) / pick(r.floor, p99))
                    .collect(),
            );
            let to_curator = u.curator.as_ref().map(|_| {
                median_spread(
                    u.rounds
                        .iter()
                        .filter_map(|r| Some(pick(r.lockwarden, p99) / pick(r.curator?, p99)))
                        .collect(),
                )
            });
            // (lockwarden, relay) and the floor, of the rounds that measured the relay.
            let (relay_rounds, relay_floors): (Vec<(f64, f64)>, Vec<f64>) = u
                .rounds
                .iter()
                .filter_map(|r: &Round| {
                    let relay = pick(r.relay?, p99);
                    Some(((pick(r.lockwarden, p99), relay), pick(r.floor, p99)))
                })
                .unzip();
            let of = |row: &Row| if p99 { row.p99_us } else { row.p50_us };
            let floors = u
                .rounds
                .iter()
                .map(|r| pick(r.floor, p99))
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), f| {
                    (lo.min(f), hi.max(f))
                });
            let relay = RelayRatios::of_rounds(&relay_rounds, Some(&relay_floors)).map(|mut ratios| {
                // The relay's own figure over all its cycles, like the other columns.
                if let Some(row) = &u.relay {
                    ratios.relay = of(row);
                }
                ratios
            });
            Ratio {
                figure: format!(
                    "uncontended acquire+release, {}",
                    if p99 { "p99" } else { "p50" }
                ),
                unit: "µs".into(),
                lockwarden: of(&u.cycle),
                curator: u.curator.as_ref().map(of),
                floor: of(&u.floor),
                to_curator: to_curator.map(|(r, _)| r),
                to_curator_spread: to_curator.map(|(_, s)| s),
                to_floor,
                to_floor_spread: Some(floor_spread),
                relay,
                note: format!(
                    "ratios: median (min–max) of {} interleaved rounds; lower is better; the floor's {} moved {:.0}–{:.0} µs across the rounds",
                    u.rounds.len(),
                    if p99 { "p99" } else { "p50" },
                    floors.0,
                    floors.1
                ),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{median_spread, RelayRatios};

    #[test]
    fn the_relay_ratios_are_the_medians_of_the_rounds_ratios() {
        // (lockwarden, relay) per round, in µs, and the floor of each round.
        let rounds = [(1400.0, 1250.0), (1300.0, 1300.0), (1200.0, 1000.0)];
        let floors = [1000.0, 1000.0, 800.0];
        let ratios = RelayRatios::of_rounds(&rounds, Some(&floors)).expect("rounds were measured");
        assert_eq!(ratios.to_relay, 1.12);
        assert_eq!(ratios.to_relay_spread, (1.0, 1.2));
        assert_eq!(ratios.relay_to_floor, Some(1.25));
        assert_eq!(ratios.relay_to_floor_spread, Some((1.25, 1.3)));
        assert_eq!(ratios.relay, 1250.0, "the median round's figure");
        assert!(
            RelayRatios::of_rounds(&[], Some(&[])).is_none(),
            "no relay, no ratios"
        );
    }

    #[test]
    fn without_a_floor_of_the_same_shape_the_relay_has_no_ratio_to_it() {
        let ratios = RelayRatios::of_rounds(&[(900.0, 600.0), (1000.0, 800.0)], None)
            .expect("rounds were measured");
        assert_eq!(
            ratios.to_relay, 1.375,
            "the mean of the middle two of an even count"
        );
        assert_eq!(ratios.relay, 700.0);
        assert_eq!(ratios.relay_to_floor, None);
        assert_eq!(ratios.relay_to_floor_spread, None);
    }

    #[test]
    fn a_median_of_an_even_count_is_the_mean_of_the_middle_two_and_nan_is_left_out() {
        assert_eq!(median_spread(vec![4.0, 1.0, 3.0, 2.0]), (2.5, (1.0, 4.0)));
        assert_eq!(median_spread(vec![f64::NAN, 2.0]), (2.0, (2.0, 2.0)));
        assert!(median_spread(vec![]).0.is_nan());
    }
}
