//! Every integration test that needs no machine of its own, in one crate: one build and
//! one link instead of one per file, and one shared ZooKeeper for all of them. A module
//! per former test file; each says what it covers. (The chaos run, the browser tests, the
//! fuzzer, the benchmark test, the dashboards' idle cost, the proptest properties, the
//! simulation, and `zk_transport`, which counts a thread's wake-ups in its own process, stay
//! test binaries of their own.)

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod audit;
mod auth;
mod bad_input;
mod checker;
mod checker_tokens;
mod cleanup_signal;
mod cli;
mod cli_election;
mod cli_semaphore;
mod contract;
mod contradicting_copy;
mod cut_read;
mod deploy;
mod election_contract;
mod elections;
mod event_expiry;
mod events;
mod fault_harness;
mod framing;
mod group_commit;
mod helix_basic;
mod holes;
mod hub_model;
mod input_rules;
mod late_answer;
mod late_landing;
mod latest_copy;
mod limits;
mod local_predecessor;
mod locks;
mod lost_entry;
mod lost_grant;
mod metrics;
mod preemption;
mod python_client;
mod queue;
mod queue_view;
mod queue_wakeups;
mod release_here;
mod rider_first_round;
mod scopes;
mod secrets;
mod semaphore_contract;
mod semaphore_events;
mod semaphores;
mod shared_multi;
mod slow_server;
mod stalled_server;
mod stand_in;
mod startup;
mod store_reads;
mod takeover_margin;
mod tls;
mod ui_assets;
mod webhook_isolation;
mod webhooks;
mod zookeeper;
