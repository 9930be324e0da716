//! `deploy/alerts.yml`: `promtool check rules` accepts it, and every series and label value
//! its rules select is one that an instance on ZooKeeper exports.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::Duration;

use lockwarden::api::error::ErrorCode;
use reqwest::StatusCode;
use serde_json::json;
use serde_yaml::Value;

use super::promql::{selectors, Selector};
use super::{read, repo, text};
use crate::common::{eventually, Service};
use crate::metrics::samples;

const WAIT: Duration = Duration::from_secs(20);

/// Series that Prometheus makes itself for every target, which no /metrics shows.
const MADE_BY_PROMETHEUS: [&str; 1] = ["up"];

/// Labels that Prometheus attaches to every series of a target.
const TARGET_LABELS: [&str; 2] = ["job", "instance"];

/// Every alert of `deploy/alerts.yml`, with its expression.
pub(super) fn alert_rules() -> Vec<(String, String)> {
    let rules: Value = serde_yaml::from_str(&read("deploy/alerts.yml")).unwrap();
    let groups = rules["groups"].as_sequence().unwrap();
    let rules = groups
        .iter()
        .flat_map(|g| g["rules"].as_sequence().unwrap());
    rules
        .map(|rule| {
            (
                text(&rule["alert"]).to_owned(),
                text(&rule["expr"]).to_owned(),
            )
        })
        .collect()
}

/// A label value that may be checked as written: no regular-expression syntax beyond `|`.
fn literal(value: &str) -> bool {
    !value.contains(['.', '*', '+', '?', '(', ')', '[', ']', '\\', '^', '$'])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_alert_rules_pass_promtool_and_use_only_series_an_instance_exports() {
    let checked = Command::new("promtool")
        .args(["check", "rules"])
        .arg(repo("deploy/alerts.yml"))
        .output()
        .expect("promtool runs (Debian's `prometheus`; scripts/install-test-deps installs it)");
    assert!(
        checked.status.success(),
        "promtool check rules: {}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );

    // An instance on ZooKeeper (whose families the in-memory store lacks), after a grant, a
    // renewal, a refusal and a release, which make the request histogram's series.
    let svc = Service::zk().await;
    eventually(WAIT, "the ZooKeeper session", || async {
        svc.get("/readyz").await.0 == StatusCode::OK
    })
    .await;
    let grant = svc.must_acquire("ops/alerts", "ops", 60_000).await;
    let lease_id = grant["lease_id"].as_str().unwrap();
    let renewed = svc.renew("ops/alerts", json!({"lease_id": lease_id})).await;
    assert_eq!(renewed.0, StatusCode::OK, "{}", renewed.1);
    let refused = svc
        .acquire("ops/alerts", json!({"owner": "other", "lease_ms": 1000}))
        .await;
    assert_eq!(refused.0, StatusCode::CONFLICT, "{}", refused.1);
    assert_eq!(svc.release("ops/alerts", lease_id).await.0, StatusCode::OK);
    let exposition = svc.metrics().await;
    let mut exported: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for ((name, labels), _) in samples(&exposition) {
        let series = exported.entry(name).or_default();
        for (label, value) in labels {
            series.entry(label).or_default().insert(value);
        }
    }

    let rules = alert_rules();
    assert!(rules.len() >= 10, "{rules:?}");
    let mut problems = Vec::new();
    for (alert, expr) in &rules {
        let found = selectors(expr);
        assert!(!found.is_empty(), "{alert}: no series in {expr}");
        for Selector { name, matchers } in found {
            if MADE_BY_PROMETHEUS.contains(&name.as_str()) {
                continue;
            }
            let Some(labels) = exported.get(&name) else {
                problems.push(format!("{alert}: {name} is not in /metrics"));
                continue;
            };
            for (label, _, value) in matchers {
                if TARGET_LABELS.contains(&label.as_str()) {
                    continue;
                }
                let Some(seen) = labels.get(&label) else {
                    problems.push(format!("{alert}: {name} has no label {label}"));
                    continue;
                };
                for wanted in value.split('|').filter(|v| literal(v)) {
                    // The request histogram makes a series on a route's first outcome.
                    let known = seen.contains(wanted)
                        || (label == "outcome"
                            && ErrorCode::ALL.iter().any(|code| code.as_str() == wanted))
                        || (label == "route"
                            && lockwarden::api::ROUTES.iter().any(|(_, r)| *r == wanted));
                    if !known {
                        problems.push(format!("{alert}: {name}{{{label}=\"{wanted}\"}}"));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}\n{exposition}");
}
