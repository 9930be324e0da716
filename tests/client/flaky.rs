//! A test double in front of real lockwarden instances: a loopback HTTP server that
//! forwards each request to an upstream (taking turns among several) and can spoil the
//! answer of the first acquire, after the real service has acted on it: answer 503
//! instead, or close the connection without an answer. It can also refuse everything
//! (as if the service were gone). It records the acquire bodies it saw. With `scripted
//! events`, it serves event streams itself: what the test pushes, as `text/event-stream`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spoil {
    /// Forward, then answer 503 store_unavailable.
    Unavailable,
    /// Forward, then close without answering.
    Reset,
}

pub struct Flaky {
    pub url: String,
    state: Arc<State>,
}

struct State {
    upstreams: Vec<String>,
    turn: AtomicUsize,
    spoil: Mutex<Option<Spoil>>,
    gone: AtomicBool,
    refuse_renewals: AtomicBool,
    refused_renewals: AtomicUsize,
    passed_renewals: AtomicUsize,
    acquires: Mutex<Vec<Value>>,
    /// The real answers to spoiled acquires.
    hidden: Mutex<Vec<Value>>,
    /// Where pushed events go, when the front serves event streams itself.
    events: Option<tokio::sync::broadcast::Sender<String>>,
    http: reqwest::Client,
}

impl Flaky {
    pub async fn start(upstreams: Vec<String>, spoil: Option<Spoil>) -> Flaky {
        Self::build(upstreams, spoil, false).await
    }

    /// Forwards everything but event streams, which it serves from `push_event`.
    pub async fn with_scripted_events(upstream: String) -> Flaky {
        Self::build(vec![upstream], None, true).await
    }

    async fn build(upstreams: Vec<String>, spoil: Option<Spoil>, scripted: bool) -> Flaky {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(State {
            upstreams,
            turn: AtomicUsize::new(0),
            spoil: Mutex::new(spoil),
            gone: AtomicBool::new(false),
            refuse_renewals: AtomicBool::new(false),
            refused_renewals: AtomicUsize::new(0),
            passed_renewals: AtomicUsize::new(0),
            acquires: Mutex::new(Vec::new()),
            hidden: Mutex::new(Vec::new()),
            events: scripted.then(|| tokio::sync::broadcast::channel(16).0),
            http: reqwest::Client::builder().no_proxy().build().unwrap(),
        });
        let serving = state.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, serving.clone()));
            }
        });
        Flaky { url, state }
    }

    /// From now on, closes every connection at once, as a dead service would.
    pub fn go_away(&self) {
        self.state.gone.store(true, Ordering::SeqCst);
    }

    /// While on, answers renewals 503 without passing them on.
    pub fn refuse_renewals(&self, on: bool) {
        self.state.refuse_renewals.store(on, Ordering::SeqCst);
    }

    /// Renewals answered 503 so far, and renewals passed on.
    pub fn renewals(&self) -> (usize, usize) {
        let refused = self.state.refused_renewals.load(Ordering::SeqCst);
        (refused, self.state.passed_renewals.load(Ordering::SeqCst))
    }

    /// How many event streams are open on the front now.
    pub fn event_streams(&self) -> usize {
        self.state.events.as_ref().map_or(0, |e| e.receiver_count())
    }

    /// Sends `raw` (one or more SSE lines and blank lines) on every open event stream.
    pub fn push_event(&self, raw: &str) {
        let events = self
            .state
            .events
            .as_ref()
            .expect("a front with scripted events");
        events.send(raw.to_owned()).expect("an open event stream");
    }

    pub fn acquires(&self) -> Vec<Value> {
        self.state.acquires.lock().unwrap().clone()
    }

    pub fn hidden_answers(&self) -> Vec<Value> {
        self.state.hidden.lock().unwrap().clone()
    }
}

struct Request {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

async fn read_request(stream: &mut TcpStream) -> Option<Request> {
    let mut buffer = Vec::new();
    let header_end = loop {
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
    };
    let head = String::from_utf8_lossy(&buffer[..header_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, path) = (first.next()?.to_owned(), first.next()?.to_owned());
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buffer[header_end + 4..].to_vec();
    while body.len() < length {
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Request {
        method,
        path,
        headers,
        body,
    })
}

async fn answer(stream: &mut TcpStream, status: u16, body: &str, extra: &str) {
    let text = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{extra}connection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(text.as_bytes()).await;
    let _ = stream.shutdown().await;
}

async fn serve(mut stream: TcpStream, state: Arc<State>) {
    if state.gone.load(Ordering::SeqCst) {
        return;
    }
    let Some(request) = read_request(&mut stream).await else {
        return;
    };
    if let Some(events) = &state.events {
        if request.method == "GET" && request.path.ends_with("/events") {
            let mut pushed = events.subscribe();
            let head =
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
            if stream.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            while let Ok(raw) = pushed.recv().await {
                if stream.write_all(raw.as_bytes()).await.is_err() {
                    return;
                }
            }
            return;
        }
    }
    if request.path.ends_with("/renew") {
        if state.refuse_renewals.load(Ordering::SeqCst) {
            state.refused_renewals.fetch_add(1, Ordering::SeqCst);
            let body = r#"{"error":{"code":"store_unavailable","message":"injected by the test"}}"#;
            answer(&mut stream, 503, body, "retry-after: 0\r\n").await;
            return;
        }
        state.passed_renewals.fetch_add(1, Ordering::SeqCst);
    }
    let is_acquire = request.method == "POST" && request.path.ends_with("/acquire");
    if is_acquire {
        let body = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        state.acquires.lock().unwrap().push(body);
    }
    let turn = state.turn.fetch_add(1, Ordering::SeqCst);
    let upstream = &state.upstreams[turn % state.upstreams.len()];
    let mut forward = state.http.request(
        request.method.parse().unwrap(),
        format!("{upstream}{}", request.path),
    );
    for (name, value) in &request.headers {
        if name == "authorization" || name == "content-type" || name == "last-event-id" {
            forward = forward.header(name.as_str(), value.as_str());
        }
    }
    let Ok(response) = forward.body(request.body).send().await else {
        return;
    };
    let status = response.status().as_u16();
    let text = response.text().await.unwrap_or_default();
    let spoil = if is_acquire {
        state.spoil.lock().unwrap().take()
    } else {
        None
    };
    match spoil {
        None => answer(&mut stream, status, &text, "").await,
        Some(spoil) => {
            let real = serde_json::from_str(&text).unwrap_or(Value::String(text));
            state.hidden.lock().unwrap().push(real);
            if spoil == Spoil::Unavailable {
                let body =
                    r#"{"error":{"code":"store_unavailable","message":"injected by the test"}}"#;
                answer(&mut stream, 503, body, "retry-after: 0\r\n").await;
            }
        }
    }
}
