//! The families render as Prometheus expects, and holds are timed as `holds.rs` says.

use super::*;
use crate::model::UnixMillis;
use crate::record::{Expiry, Holder};

#[test]
fn every_family_renders_with_help_and_counters_end_in_total() {
    let metrics = Metrics::new();
    metrics.grants.inc();
    metrics.request_took(
        "/v1/locks/{name}/acquire",
        "post",
        "ok",
        Duration::from_millis(3),
    );
    let text = metrics.render(Format::Classic);
    assert!(
        text.contains("lockwarden_grants_total{resource=\"lock\"} 1\n"),
        "{text}"
    );
    assert!(text.contains(
        "lockwarden_http_request_duration_seconds_bucket{method=\"post\",outcome=\"ok\",route=\"/v1/locks/{name}/acquire\",le=\"0.005\"} 1\n"
    ), "{text}");
    for line in text.lines().filter(|l| l.starts_with("# TYPE")) {
        let name = line.split(' ').nth(2).unwrap();
        assert!(text.contains(&format!("# HELP {name} ")), "{name} has help");
        if line.ends_with(" counter") {
            assert!(name.ends_with("_total"), "{line}");
        }
    }
    assert!(
        !text.contains("lockwarden_zookeeper"),
        "no ZooKeeper series without a ZooKeeper store"
    );
}

#[test]
fn holds_are_timed_from_the_grant_and_expired_ones_end_with_their_lease() {
    let metrics = Metrics::new();
    let holder = Holder {
        expires: Expiry::At(UnixMillis(12_000)),
        acquired_at: Some(UnixMillis(10_000)),
        ..Holder::minimal("o")
    };
    metrics.hold_ended(HoldEnd::Expired, &holder, UnixMillis(50_000));
    metrics.hold_ended(HoldEnd::Released, &holder, UnixMillis(11_500));
    metrics.hold_ended(HoldEnd::Forced, &holder, UnixMillis(9_000));
    let sum = |end| metrics.holds.at(end).get_sample_sum();
    assert_eq!(sum(HoldEnd::Expired), 2.0);
    assert_eq!(sum(HoldEnd::Released), 1.5);
    assert_eq!(
        sum(HoldEnd::Forced),
        0.0,
        "a clock behind the grant's counts 0"
    );
    assert_eq!(metrics.holds.at(HoldEnd::Forced).get_sample_count(), 1);
}

#[test]
fn zookeeper_series_start_connecting() {
    let metrics = Metrics::new();
    let zk = metrics.zookeeper();
    zk.session(zookeeper::SessionState::Connected);
    let text = metrics.render(Format::Classic);
    assert!(text.contains("lockwarden_zookeeper_session_state{state=\"connected\"} 1\n"));
    assert!(text.contains("lockwarden_zookeeper_session_state{state=\"connecting\"} 0\n"));
}

#[test]
fn each_resource_s_families_show_under_its_resource_label() {
    let (locks, semaphores, elections) = (Metrics::new(), Metrics::new(), Metrics::new());
    locks.grants.inc();
    semaphores.grants.inc_by(2);
    elections.force_releases.at(ForceOutcome::Released).inc();
    semaphores.request_took("/v1/x", "get", "ok", Duration::from_millis(1));
    let others = [("semaphore", &semaphores), ("election", &elections)];
    let text = locks.render_with(Format::Classic, &others);
    for series in [
        "lockwarden_grants_total{resource=\"lock\"} 1\n",
        "lockwarden_grants_total{resource=\"semaphore\"} 2\n",
        "lockwarden_grants_total{resource=\"election\"} 0\n",
        "lockwarden_force_releases_total{outcome=\"released\",resource=\"election\"} 1\n",
    ] {
        assert!(text.contains(series), "{series} in {text}");
    }
    assert_eq!(
        text.matches("# TYPE lockwarden_grants_total ").count(),
        1,
        "one family"
    );
    for name in PER_RESOURCE {
        assert!(
            text.contains(&format!("# TYPE {name} ")),
            "{name} is a family"
        );
    }
    assert!(
        !text.contains("/v1/x"),
        "the instance's families are the lock service's alone"
    );
    let open = locks.render_with(Format::OpenMetrics, &others);
    assert!(
        open.contains("lockwarden_grants_total{resource=\"semaphore\"} 2\n"),
        "{open}"
    );
}
