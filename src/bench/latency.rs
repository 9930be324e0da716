//! The latency scenarios: a release to the next waiter's grant, and a preemption request to
//! the holder's webhook arriving at the bench's own receiver.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::routing::post;
use serde_json::{json, Value};

use super::scenarios::Bench;
use super::Row;

type Arrivals = Arc<Mutex<Vec<(String, Instant)>>>;

impl Bench {
    /// From a release to the next waiter's 200: one holder, one waiter that queued first;
    /// with `election`, from a resignation to the next candidate's 200.
    pub async fn handoff(self: &Arc<Self>, election: bool) -> Result<Row, String> {
        let (root, take, let_go, who, waiting_field) = if election {
            ("elections", "campaign", "resign", "candidate", "candidates")
        } else {
            ("locks", "acquire", "release", "owner", "waiters")
        };
        let url = |action: &str| format!("{}/v1/{root}/{}-h/{action}", self.args.url, self.run);
        let rounds = self.args.cycles.max(10) / 2;
        let warm = self.args.warmup.min(50);
        let mut samples = Vec::with_capacity(rounds);
        let waiting = json!({who: "next", "lease_ms": 60_000, "waiting_ms": 30_000}).to_string();
        for round in 0..rounds + warm {
            let held = json!({who: "first", "lease_ms": 60_000}).to_string();
            let (status, first) = self.post(&url(take), &held).await?;
            if status != 200 {
                return Err(format!("holder's {take} answered {status}: {first}"));
            }
            let bench = self.clone();
            let body = waiting.clone();
            let next_url = url(take);
            let next = tokio::spawn(async move {
                let answer = bench.post(&next_url, &body).await;
                (answer, Instant::now())
            });
            // Let go only once the waiter is in the queue.
            let info_url = format!("{}/v1/{root}/{}-h", self.args.url, self.run);
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let response = self
                    .http
                    .get(&info_url)
                    .send()
                    .await
                    .map_err(|e| e.to_string())?;
                let info: Value =
                    serde_json::from_slice(&response.bytes().await.map_err(|e| e.to_string())?)
                        .unwrap_or(Value::Null);
                if info[waiting_field] == 1 {
                    break;
                }
                if Instant::now() > deadline {
                    return Err("the waiter never queued".into());
                }
            }
            let release = json!({"lease_id": first["lease_id"]}).to_string();
            let sent = Instant::now();
            self.post(&url(let_go), &release).await?;
            let (answer, got) = next.await.map_err(|e| e.to_string())?;
            let (status, granted) = answer?;
            if status != 200 {
                return Err(format!("waiter answered {status}: {granted}"));
            }
            if round >= warm {
                samples.push(got.saturating_duration_since(sent));
            }
            let release = json!({"lease_id": granted["lease_id"]}).to_string();
            self.post(&url(let_go), &release).await?;
        }
        let (name, note) = if election {
            (
                "election handoff: resign → next candidate's 200",
                "from sending the resignation to the waiting candidate receiving its win",
            )
        } else {
            (
                "handoff: release → next waiter's 200",
                "from sending the release to the waiter receiving its grant",
            )
        };
        Ok(Row {
            note: note.into(),
            ..Row::of_samples(name, 2, &mut samples)
        })
    }

    /// From a preemption request to the holder's webhook arrival.
    pub async fn preempt(&self) -> Result<Row, String> {
        let arrivals: Arrivals = Arc::default();
        let seen = arrivals.clone();
        let app = axum::Router::new().route(
            "/hook",
            post(move |body: axum::body::Bytes| {
                let seen = seen.clone();
                async move {
                    let at = Instant::now();
                    let event: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    if event["type"] == "lock.cleanup_requested" {
                        let who = event["data"]["requestor"]["owner"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned();
                        seen.lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push((who, at));
                    }
                    axum::http::StatusCode::NO_CONTENT
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| e.to_string())?;
        let hook = format!(
            "http://{}/hook",
            listener.local_addr().map_err(|e| e.to_string())?
        );
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        let rounds = (self.args.cycles / 10).max(5);
        let mut samples = Vec::new();
        for round in 0..rounds + self.args.warmup.min(20) {
            let holder = json!({"owner": "holder", "lease_ms": 60_000, "priority": 1, "cleanup_ms": 60_000, "notify_url": hook}).to_string();
            let (status, held) = self.post(&self.lock_url("pre", "acquire"), &holder).await?;
            if status != 200 {
                server.abort();
                return Ok(Row {
                    scenario: "preempt: request → webhook arrival".into(),
                    note: format!("skipped: the service refused notify_url ({held}); run it with --webhook-secret and --webhook-allow-private"),
                    ..Row::default()
                });
            }
            let who = format!("pre-{round}");
            let preempt =
                json!({"owner": who, "lease_ms": 1000, "priority": 2, "waiting_ms": 0}).to_string();
            let sent = Instant::now();
            self.post(&self.lock_url("pre", "acquire"), &preempt)
                .await?;
            let deadline = Instant::now() + Duration::from_secs(10);
            let arrived = loop {
                if let Some((_, at)) = arrivals
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .iter()
                    .find(|(w, _)| *w == who)
                {
                    break *at;
                }
                if Instant::now() > deadline {
                    return Err(format!("no webhook for {who} within 10 s"));
                }
                tokio::time::sleep(Duration::from_micros(200)).await;
            };
            if round >= self.args.warmup.min(20) {
                samples.push(arrived.saturating_duration_since(sent));
            }
            let release = json!({"lease_id": held["lease_id"]}).to_string();
            self.post(&self.lock_url("pre", "release"), &release)
                .await?;
        }
        server.abort();
        Ok(Row {
            note: "measured by the bench's own receiver on loopback".into(),
            ..Row::of_samples("preempt: request → webhook arrival", 1, &mut samples)
        })
    }
}
