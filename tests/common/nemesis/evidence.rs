//! What a chaos run that failed leaves beside the instance logs: each ZooKeeper node's log
//! (timestamped) and its `cons`/`mntr` figures (each connection's latencies), each
//! instance's `/metrics`, and each node's own copy of every znode under the run's root
//! (`znodes.txt`). A lock that
//! one instance cannot take while the others could is told apart this way: its record as
//! that instance's server sees it differs from the leader's.

use std::fmt::Write as _;
use std::time::Duration;

use zookeeper_client as zkc;

use super::{Cluster, NODES};
use crate::common::zk::four_letter;
use crate::common::znodes_under;

/// Keeps the evidence in `cluster.logs`, and returns one line per znode whose copies differ
/// between the nodes that answered.
pub async fn keep(cluster: &Cluster) -> Vec<String> {
    for id in 1..=NODES {
        let kept = cluster.logs.join(format!("zookeeper-{id}.log"));
        let _ = std::fs::copy(cluster.ensemble.log_path(id), kept);
        // Each connection's latencies (min/avg/max since it opened) and the node's own.
        let port = cluster.ensemble.client_addr(id).port();
        let stats = tokio::task::spawn_blocking(move || {
            format!(
                "{}\n{}",
                four_letter(port, "cons"),
                four_letter(port, "mntr")
            )
        });
        let stats = stats.await.unwrap_or_default();
        let _ = std::fs::write(cluster.logs.join(format!("zookeeper-{id}.stats")), stats);
    }
    let http = crate::common::http_client();
    for (i, url) in cluster.urls().iter().enumerate() {
        let answer = http.get(format!("{url}/metrics")).send().await;
        let text = match answer {
            Ok(answer) => answer.text().await.unwrap_or_default(),
            Err(error) => format!("no answer: {error}"),
        };
        let _ = std::fs::write(cluster.logs.join(format!("instance-{i}.metrics")), text);
    }
    let mut clients = Vec::new();
    for id in 1..=NODES {
        let connect = cluster.ensemble.client_connect(id);
        let connecting = zkc::Client::connect(&connect);
        if let Ok(Ok(client)) = tokio::time::timeout(Duration::from_secs(5), connecting).await {
            clients.push((id, client));
        }
    }
    let mut paths = std::collections::BTreeSet::new();
    for (_, client) in &clients {
        paths.extend(znodes_under(client, &cluster.root).await);
    }
    let mut table = String::new();
    let mut differing = Vec::new();
    for path in &paths {
        let mut copies = Vec::new();
        for (id, client) in &clients {
            let copy = match client.get_data(path).await {
                Ok((data, stat)) => format!(
                    "v{} mzxid {:#x} {} bytes",
                    stat.version,
                    stat.mzxid,
                    data.len()
                ),
                Err(zkc::Error::NoNode) => "absent".to_owned(),
                Err(error) => format!("no answer ({error})"),
            };
            copies.push(format!("node {id}: {copy}"));
        }
        let line = format!("{path}: {}", copies.join("; "));
        let _ = writeln!(table, "{line}");
        let answered = copies.iter().filter(|c| !c.contains("no answer"));
        let first = answered
            .clone()
            .next()
            .map(|c| &c[c.find(':').unwrap_or(0)..]);
        if answered
            .clone()
            .any(|c| Some(&c[c.find(':').unwrap_or(0)..]) != first)
        {
            differing.push(line);
        }
    }
    let _ = std::fs::write(cluster.logs.join("znodes.txt"), table);
    differing
}
