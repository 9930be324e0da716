//! A real webhook receiver for tests: an HTTP server on loopback that records every request,
//! verifies its Standard Webhooks signature on its own, and answers as scripted.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

pub const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

#[derive(Clone, Debug)]
pub struct Delivery {
    pub id: String,
    pub timestamp: i64,
    pub signature_ok: bool,
    pub body: Value,
    pub path: String,
    pub at: Instant,
}

impl Delivery {
    pub fn kind(&self) -> &str {
        self.body["type"].as_str().unwrap_or_default()
    }
}

#[derive(Clone, Copy, Debug)]
pub enum Answer {
    Status(u16),
    Redirect,
    Delay(Duration),
}

#[derive(Default)]
struct State {
    deliveries: Vec<Delivery>,
    script: VecDeque<Answer>,
}

#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    state: Arc<Mutex<State>>,
}

fn verify(headers: &HeaderMap, body: &[u8]) -> (String, i64, bool) {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let (id, timestamp, signature) = (
        get("webhook-id"),
        get("webhook-timestamp"),
        get("webhook-signature"),
    );
    let key = STANDARD
        .decode(SECRET.trim_start_matches("whsec_"))
        .unwrap();
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    let expected = format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()));
    let ok = signature.split(' ').any(|s| s == expected);
    (id, timestamp.parse().unwrap_or(0), ok)
}

impl Receiver {
    pub async fn start() -> Receiver {
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let app = Router::new().route(
            "/{*path}",
            post(
                move |uri: axum::http::Uri, headers: HeaderMap, body: Bytes| {
                    let state = shared.clone();
                    async move {
                        let (id, timestamp, signature_ok) = verify(&headers, &body);
                        let delivery = Delivery {
                            id,
                            timestamp,
                            signature_ok,
                            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                            path: uri.path().to_owned(),
                            at: Instant::now(),
                        };
                        let answer = {
                            let mut state = state.lock().unwrap();
                            state.deliveries.push(delivery);
                            state.script.pop_front()
                        };
                        let response: Response = match answer {
                            None | Some(Answer::Status(200)) => StatusCode::OK.into_response(),
                            Some(Answer::Status(code)) => {
                                StatusCode::from_u16(code).unwrap().into_response()
                            }
                            Some(Answer::Redirect) => {
                                (StatusCode::TEMPORARY_REDIRECT, [("location", "/elsewhere")])
                                    .into_response()
                            }
                            Some(Answer::Delay(pause)) => {
                                tokio::time::sleep(pause).await;
                                StatusCode::OK.into_response()
                            }
                        };
                        response
                    }
                },
            ),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Receiver { url, state }
    }

    /// The next answers to give, in order; after them, 200.
    pub fn script(&self, answers: &[Answer]) {
        self.state
            .lock()
            .unwrap()
            .script
            .extend(answers.iter().copied());
    }

    pub fn deliveries(&self) -> Vec<Delivery> {
        self.state.lock().unwrap().deliveries.clone()
    }

    pub fn of_kind(&self, kind: &str) -> Vec<Delivery> {
        self.deliveries()
            .into_iter()
            .filter(|d| d.kind() == kind)
            .collect()
    }

    /// Waits until `n` deliveries of `kind` arrived, and returns them.
    pub async fn wait_for(&self, kind: &str, n: usize, within: Duration) -> Vec<Delivery> {
        let deadline = Instant::now() + within;
        loop {
            let found = self.of_kind(kind);
            if found.len() >= n {
                return found;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {n} {kind}; got {:?}",
                self.deliveries()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
