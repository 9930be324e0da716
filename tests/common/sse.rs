//! A small Server-Sent Events reader for tests: opens a stream and hands its events out, in
//! order, as they arrive (comments, such as heartbeats, too).

use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::Value;
use tokio::sync::mpsc;

#[derive(Clone, Debug)]
pub struct SseEvent {
    pub event: String,
    pub id: String,
    pub data: Value,
    /// When the reader got it.
    pub at: Instant,
}

#[derive(Debug)]
pub enum Item {
    Event(SseEvent),
    Comment(String),
}

pub struct SseStream {
    items: mpsc::UnboundedReceiver<Item>,
    pub status: reqwest::StatusCode,
    pub content_type: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SseStream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl SseStream {
    pub async fn open(url: &str, last_event_id: Option<&str>) -> SseStream {
        Self::open_as(url, last_event_id, None).await
    }

    /// Opens the stream with `token` as its bearer token.
    pub async fn open_as(url: &str, last_event_id: Option<&str>, token: Option<&str>) -> SseStream {
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        let mut request = client.get(url).header("accept", "text/event-stream");
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id);
        }
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.expect("the stream opens");
        let status = response.status();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let (sender, items) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            let mut body = response.bytes_stream();
            let mut buffer = String::new();
            while let Some(Ok(chunk)) = body.next().await {
                buffer.push_str(&String::from_utf8_lossy(&chunk));
                while let Some(end) = buffer.find("\n\n") {
                    let block: String = buffer.drain(..end + 2).collect();
                    if let Some(item) = parse(&block) {
                        if sender.send(item).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        SseStream {
            items,
            status,
            content_type,
            task,
        }
    }

    /// The next item, or `None` once the stream has ended; panics after `within`.
    pub async fn next_item(&mut self, within: Duration) -> Option<Item> {
        tokio::time::timeout(within, self.items.recv())
            .await
            .expect("an item arrives in time")
    }

    /// The next event (skipping comments); panics if none comes within `within`.
    pub async fn next_event(&mut self, within: Duration) -> SseEvent {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_item(left).await {
                Some(Item::Event(event)) => return event,
                Some(Item::Comment(_)) => continue,
                None => panic!("the stream ended"),
            }
        }
    }

    /// The next event of type `kind`, skipping others; panics if none comes within `within`.
    pub async fn next_of(&mut self, kind: &str, within: Duration) -> SseEvent {
        let deadline = Instant::now() + within;
        loop {
            let event = self
                .next_event(deadline.saturating_duration_since(Instant::now()))
                .await;
            if event.event == kind {
                return event;
            }
        }
    }
}

fn parse(block: &str) -> Option<Item> {
    let (mut event, mut id, mut data, mut comment) = (None, String::new(), String::new(), None);
    for line in block.lines() {
        if let Some(text) = line.strip_prefix(':') {
            comment = Some(text.trim().to_owned());
        } else if let Some(value) = line.strip_prefix("event:") {
            event = Some(value.trim().to_owned());
        } else if let Some(value) = line.strip_prefix("id:") {
            id = value.trim().to_owned();
        } else if let Some(value) = line.strip_prefix("data:") {
            data.push_str(value.trim_start());
        }
    }
    match (event, comment) {
        (Some(event), _) => Some(Item::Event(SseEvent {
            event,
            id,
            data: serde_json::from_str(&data).unwrap_or(Value::String(data)),
            at: Instant::now(),
        })),
        (None, Some(comment)) => Some(Item::Comment(comment)),
        (None, None) => None,
    }
}
