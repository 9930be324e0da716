//! The benchmark's own HTTP client for its measuring loops: one HTTP/1.1 connection per
//! client task, requests built from prepared bytes, and only the answer's `lease_id` parsed.
//! A general-purpose client (a pool, redirects, per-request configuration) would spend the
//! CPU the service and ZooKeeper share with it on this machine.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use serde::Deserialize;

pub struct Connection {
    sender: SendRequest<Full<Bytes>>,
    authority: String,
    authorization: Option<String>,
}

/// What the loops need from an answer: its status and, for a grant, the lease.
pub struct Answer {
    pub status: u16,
    pub body: Bytes,
}

impl Answer {
    pub fn lease_id(&self) -> Option<String> {
        #[derive(Deserialize)]
        struct Granted {
            lease_id: String,
        }
        serde_json::from_slice::<Granted>(&self.body)
            .ok()
            .map(|g| g.lease_id)
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

impl Connection {
    /// Opens a connection to `base` (`http://host:port`, no path).
    pub async fn open(base: &str, token: Option<&str>) -> Result<Connection, String> {
        let authority = base
            .strip_prefix("http://")
            .ok_or_else(|| format!("the bench speaks plain http only, not {base}"))?
            .trim_end_matches('/')
            .to_owned();
        let stream = tokio::net::TcpStream::connect(&authority)
            .await
            .map_err(|e| format!("connecting to {authority}: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let (sender, connection) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(connection);
        Ok(Connection {
            sender,
            authority,
            authorization: token.map(|t| format!("Bearer {t}")),
        })
    }

    /// POSTs a JSON body to `path` and reads the whole answer.
    pub async fn post(&mut self, path: &str, body: Bytes) -> Result<Answer, String> {
        let mut request = hyper::Request::post(path)
            .header(hyper::header::HOST, &self.authority)
            .header(hyper::header::CONTENT_TYPE, "application/json");
        if let Some(authorization) = &self.authorization {
            request = request.header(hyper::header::AUTHORIZATION, authorization);
        }
        let request = request.body(Full::new(body)).map_err(|e| e.to_string())?;
        self.sender.ready().await.map_err(|e| e.to_string())?;
        let response = self
            .sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok(Answer { status, body })
    }
}
