//! HTTPS (`serve --tls-cert --tls-key`), with a CA and a certificate made at test time
//! (common::tls), on the embedded store: the API, the dashboard and an event stream over
//! TLS; the CLI with and without `--ca-file`; the Rust client with and without the CA; a
//! plain-HTTP request and a client that never handshakes, each cut off while the service
//! keeps serving; and a certificate that cannot be read, which stops start-up.

use crate::common;

use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use common::tls::TestCa;
use lockwarden::cli::exit;
use lockwarden::config::ServeArgs;
use lockwarden_client::{Client, Error};
use reqwest::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::Command;

fn in_memory() -> ServeArgs {
    let mut args = ServeArgs::defaults();
    args.max_clock_skew_ms = 0;
    args
}

/// The lockwarden binary, with no address, token or CA from the environment.
fn lockwarden() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_lockwarden"));
    command
        .env_remove("LOCKWARDEN_ADDR")
        .env_remove("LOCKWARDEN_TOKEN")
        .env_remove("LOCKWARDEN_CA_FILE")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

async fn output(command: &mut Command) -> Output {
    tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("the command finishes within 60 s")
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_the_dashboard_and_an_event_stream_work_over_https() {
    let ca = TestCa::new();
    let service = ca.service(in_memory()).await;
    assert!(service.base.starts_with("https://127.0.0.1:"));
    let lease = service.must_acquire("tls/api", "alice", 30_000).await;
    let lease_id = lease["lease_id"].as_str().unwrap();
    let (status, body) = service.release("tls/api", lease_id).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    let page = service.http.get(format!("{}/ui", service.base)).send();
    let page = page.await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert!(page.text().await.unwrap().contains("/ui/app.js"));

    // The Rust client, trusting the CA: a lock's stream, and a lock taken and let go.
    let client = Client::new(&service.base).ca_pem(&ca.ca_pem).unwrap();
    let mut watch = client.watch("tls/stream");
    watch.connect().await.unwrap();
    let guard = client.lock("tls/stream").acquire().await.unwrap();
    let acquired = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let event = watch.next().await.unwrap();
            if event.kind == "acquired" {
                return event;
            }
        }
    })
    .await
    .expect("the stream shows the acquire within 10 s");
    assert_eq!(
        acquired.lock.unwrap().fencing_token,
        Some(guard.fencing_token())
    );
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_client_without_the_ca_fails_at_once_on_tls() {
    let ca = TestCa::new();
    let service = ca.service(in_memory()).await;
    let client = Client::new(&service.base).retry_for(Duration::from_secs(10));
    let started = Instant::now();
    let error = client.status("tls/untrusted").await.unwrap_err();
    assert!(matches!(error, Error::Tls(_)), "{error}");
    assert!(error.to_string().contains("UnknownIssuer"), "{error}");
    assert!(!error.is_transient());
    assert!(started.elapsed() < Duration::from_secs(5), "not retried");

    let no_pem = Client::new(&service.base).ca_pem("not a certificate");
    assert!(matches!(no_pem, Err(Error::InvalidArgument(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_trusts_the_service_with_ca_file_and_says_so_without_it() {
    let ca = TestCa::new();
    let service = ca.service(in_memory()).await;
    let ca_file = ca.ca_file.display().to_string();

    let held = output(lockwarden().env("LOCKWARDEN_ADDR", &service.base).args([
        "lock",
        "tls/cli",
        "--ca-file",
        &ca_file,
        "--",
        "true",
    ]))
    .await;
    assert_eq!(held.status.code(), Some(0), "{}", text(&held.stderr));
    let status = output(lockwarden().env("LOCKWARDEN_CA_FILE", &ca_file).args([
        "status",
        "tls/cli",
        "--addr",
        &service.base,
    ]))
    .await;
    assert_eq!(status.status.code(), Some(0), "{}", text(&status.stderr));
    assert!(
        text(&status.stdout).contains("free"),
        "{}",
        text(&status.stdout)
    );

    let started = Instant::now();
    let untrusted = output(
        lockwarden()
            .env("LOCKWARDEN_ADDR", &service.base)
            .args(["status", "tls/cli"]),
    )
    .await;
    let stderr = text(&untrusted.stderr);
    assert_eq!(
        untrusted.status.code(),
        Some(i32::from(exit::UNREACHABLE)),
        "{stderr}"
    );
    assert!(stderr.contains("UnknownIssuer"), "{stderr}");
    assert!(stderr.contains("--ca-file"), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "not retried for --retry-for's 10 s"
    );

    let missing = output(lockwarden().args([
        "status",
        "tls/cli",
        "--addr",
        &service.base,
        "--ca-file",
        "/nonexistent/ca.pem",
    ]))
    .await;
    let stderr = text(&missing.stderr);
    assert_eq!(
        missing.status.code(),
        Some(i32::from(exit::USAGE)),
        "{stderr}"
    );
    assert!(
        stderr.contains("cannot read the CA file /nonexistent/ca.pem"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_to_the_tls_port_is_cut_off_and_the_service_keeps_serving() {
    let ca = TestCa::new();
    let service = ca.service(in_memory()).await;
    let addr = service.base.trim_start_matches("https://").to_owned();

    let mut raw = TcpStream::connect(&addr).await.unwrap();
    raw.write_all(b"GET /healthz HTTP/1.1\r\nHost: lockwarden\r\n\r\n")
        .await
        .unwrap();
    let mut reply = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), raw.read_to_end(&mut reply));
    // Closed or reset, either way at once and without an HTTP answer.
    let _ = read.await.expect("the connection is closed, not left open");
    assert!(!reply.starts_with(b"HTTP/"), "{}", text(&reply));

    let plain = common::http_client().get(format!("http://{addr}/healthz"));
    assert!(plain.send().await.is_err(), "no plain-HTTP answer");

    let (status, body) = service.get("/healthz").await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_handshakes_holds_its_slot_only_for_the_read_timeout() {
    let ca = TestCa::new();
    let mut args = in_memory();
    args.request_read_timeout_ms = 400;
    args.max_connections = 1;
    let service = ca.service(args).await;
    let addr = service.base.trim_start_matches("https://").to_owned();

    let connected = Instant::now();
    let mut silent = TcpStream::connect(&addr).await.unwrap();
    // The only connection slot is the silent client's: this request waits for it.
    let (status, body) = service.get("/healthz").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let waited = connected.elapsed();
    assert!(
        waited >= Duration::from_millis(400),
        "the handshake held the slot: {waited:?}"
    );
    let mut buffer = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_secs(5), silent.read(&mut buffer));
    let read = read.await.expect("the silent connection is closed");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_that_cannot_be_read_stops_start_up_naming_the_file() {
    let ca = TestCa::new();
    let started = output(
        lockwarden()
            .args(["serve", "--listen", "127.0.0.1:0"])
            .env("LOCKWARDEN_TLS_CERT", "/nonexistent/server.pem")
            .env("LOCKWARDEN_TLS_KEY", &ca.key_file)
            .env("RUST_LOG", "warn"),
    )
    .await;
    let stderr = text(&started.stderr);
    assert_eq!(started.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot read --tls-cert /nonexistent/server.pem"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}
