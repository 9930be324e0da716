//! The memory scenario: many held locks and many parked waiters, the service's resident
//! memory meanwhile, and listing every lock page by page.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};
use serde_json::{json, Value};

use super::scenarios::Bench;
use super::Row;

/// Resident memory of a process, in MiB, from /proc.
fn rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib / 1024.0)
}

impl Bench {
    pub async fn memory(
        self: &Arc<Self>,
        locks: usize,
        waiters: usize,
        pid: Option<u32>,
    ) -> Result<Vec<Row>, String> {
        let started = Instant::now();
        let before = pid.and_then(rss_mib);
        let prefix = format!("{}-mem", self.run());
        stream::iter(0..locks)
            .map(|i| {
                let bench = self.clone();
                let name = format!("{prefix}%2Fl{i:07}");
                async move {
                    let body = json!({"owner": "memory", "lease_ms": 3_600_000, "message": "held for the memory scenario"});
                    let (status, reply) = bench.post(&bench.raw_url(&name, "acquire"), &body.to_string()).await?;
                    if status == 200 { Ok(()) } else { Err(format!("acquire answered {status}: {reply}")) }
                }
            })
            .buffer_unordered(64)
            .collect::<Vec<Result<(), String>>>()
            .await
            .into_iter()
            .collect::<Result<Vec<()>, String>>()?;
        let filled = started.elapsed();
        // Parked waiters: each waits on one of the held locks until the run ends.
        let parked: Vec<_> = (0..waiters)
            .map(|i| {
                let bench = self.clone();
                let name = format!("{prefix}%2Fl{:07}", i % locks.max(1));
                tokio::spawn(async move {
                    let body = json!({"owner": format!("waiter-{i}"), "lease_ms": 1000, "waiting_ms": 300_000});
                    let _ = bench.post(&bench.raw_url(&name, "acquire"), &body.to_string()).await;
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let during = pid.and_then(rss_mib);
        let mut pages = Vec::new();
        let mut listed = 0;
        let mut cursor: Option<String> = None;
        let listing = Instant::now();
        loop {
            let mut url = format!("{}/v1/locks?prefix={prefix}/&limit=1000", self.args.url);
            if let Some(c) = &cursor {
                url.push_str(&format!("&cursor={c}"));
            }
            let page_started = Instant::now();
            let (status, page) = self.get(&url).await?;
            pages.push(page_started.elapsed());
            if status != 200 {
                return Err(format!("listing answered {status}: {page}"));
            }
            listed += page["locks"].as_array().map_or(0, Vec::len);
            match page["next_cursor"].as_str() {
                Some(next) => cursor = Some(next.to_owned()),
                None => break,
            }
        }
        let listing = listing.elapsed();
        for task in parked {
            task.abort();
        }
        let mib = |v: Option<f64>| v.map_or("n/a".to_string(), |m| format!("{m:.0} MiB"));
        let fill = Row {
            scenario: "memory: held locks and parked waiters".into(),
            clients: waiters,
            operations: locks,
            per_second: locks as f64 / filled.as_secs_f64(),
            note: format!(
                "service RSS {} before, {} with {locks} held locks and {waiters} waiters",
                mib(before),
                mib(during)
            ),
            ..Row::default()
        };
        let pages_count = pages.len();
        let list = Row {
            per_second: pages_count as f64 / listing.as_secs_f64(),
            note: format!("{listed} locks listed in {:.2} s", listing.as_secs_f64()),
            ..Row::of_samples("memory: list every lock, 1000 a page", 1, &mut pages)
        };
        Ok(vec![fill, list])
    }

    async fn get(&self, url: &str) -> Result<(u16, Value), String> {
        let response = self
            .http()
            .get(url)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let bytes = response.bytes().await.map_err(|e| e.to_string())?;
        Ok((
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        ))
    }
}
