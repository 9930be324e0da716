//! One `/metrics` for three kinds of resource. Locks, semaphores and elections are each
//! kept by a `LockService` of their own, each recording into its own [`Metrics`]; the
//! families such a service records ([`PER_RESOURCE`]) are shown once, with a `resource`
//! label (`lock`, `semaphore`, `election`) telling the three apart. Every other family (HTTP,
//! ZooKeeper, webhooks, streams, the process) is the instance's and is shown as the lock
//! service's metrics have it.

use prometheus::proto::{LabelPair, MetricFamily};

use super::Metrics;

/// The families a resource's service records, each shown with a `resource` label.
pub const PER_RESOURCE: [&str; 19] = [
    "lockwarden_grants_total",
    "lockwarden_handoffs_total",
    "lockwarden_expirations_total",
    "lockwarden_preemptions_total",
    "lockwarden_takeovers_total",
    "lockwarden_force_releases_total",
    "lockwarden_waits_total",
    "lockwarden_waits_refused_total",
    "lockwarden_waiter_wakeups_total",
    "lockwarden_head_graces_total",
    "lockwarden_queue_reads_saved_total",
    "lockwarden_event_hub_reads_total",
    "lockwarden_queue_joins_total",
    "lockwarden_acquire_wait_seconds",
    "lockwarden_lock_hold_seconds",
    "lockwarden_handoff_write_seconds",
    "lockwarden_locks_held",
    "lockwarden_waiters",
    "lockwarden_queue_joins_waiting",
];

/// The lock service's families, `locks`, with the [`PER_RESOURCE`] ones labelled
/// `resource="lock"` and the same families of `others` (each another resource's metrics)
/// merged in under their own resource.
pub(super) fn merged(
    mut locks: Vec<MetricFamily>,
    others: &[(&str, &Metrics)],
) -> Vec<MetricFamily> {
    let gathered: Vec<(&str, Vec<MetricFamily>)> = others
        .iter()
        .map(|(resource, metrics)| (*resource, metrics.registry.gather()))
        .collect();
    for family in locks
        .iter_mut()
        .filter(|f| PER_RESOURCE.contains(&f.name()))
    {
        label(family, "lock");
        for (resource, families) in &gathered {
            let same = families.iter().find(|f| f.name() == family.name());
            if let Some(same) = same {
                let mut same = same.clone();
                label(&mut same, resource);
                family.mut_metric().extend(same.take_metric());
            }
        }
    }
    locks
}

/// Adds `resource` to every series of `family`, keeping the labels sorted by name.
fn label(family: &mut MetricFamily, resource: &str) {
    for metric in family.mut_metric() {
        let mut labels = metric.take_label();
        let mut pair = LabelPair::default();
        pair.set_name("resource".to_owned());
        pair.set_value(resource.to_owned());
        labels.push(pair);
        labels.sort_by(|a, b| a.name().cmp(b.name()));
        metric.set_label(labels);
    }
}
