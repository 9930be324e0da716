//! The Python client (clients/python) against a real service on ZooKeeper: runs its pytest
//! tests with the test venv's Python (`scripts/install-test-deps` installs httpx, pytest and
//! the client's build backend there), handing them the instance's URL and tokens, and the
//! URL and CA of a second instance that serves HTTPS (`--tls-cert`).
//! `$LOCKWARDEN_TEST_VENV` names another venv.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use crate::common::tls::TestCa;
use crate::common::Service;
use lockwarden::config::ServeArgs;

const TOKEN: &str = "python-api-token";
const ADMIN: &str = "python-admin-token";
/// The tests take about 15 s; past this, they hang.
const DEADLINE: Duration = Duration::from_secs(120);

fn python() -> PathBuf {
    let venv = std::env::var_os("LOCKWARDEN_TEST_VENV")
        .map_or_else(|| PathBuf::from("/opt/lockwarden-test-venv"), PathBuf::from);
    let python = venv.join("bin/python");
    assert!(
        python.is_file(),
        "{} is missing: run ./scripts/install-test-deps",
        python.display()
    );
    python
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_clients_tests_pass_against_a_service_on_zookeeper() {
    let svc = Service::zk_with(|args| {
        args.api_tokens = vec![TOKEN.into()];
        args.admin_token = Some(ADMIN.into());
    })
    .await;
    // The same tokens over HTTPS, with a CA made here (for `ca_file`).
    let ca = TestCa::new();
    let mut tls_args = ServeArgs::defaults();
    tls_args.api_tokens = vec![TOKEN.into()];
    tls_args.admin_token = Some(ADMIN.into());
    let tls = ca.service(tls_args).await;
    let run = tokio::process::Command::new(python())
        .args([
            "-m",
            "pytest",
            "clients/python/tests",
            "-q",
            "-p",
            "no:cacheprovider",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("LOCKWARDEN_TEST_URL", &svc.base)
        .env("LOCKWARDEN_TEST_TOKEN", TOKEN)
        .env("LOCKWARDEN_TEST_ADMIN_TOKEN", ADMIN)
        .env("LOCKWARDEN_TEST_TLS_URL", &tls.base)
        .env("LOCKWARDEN_TEST_TLS_CA", &ca.ca_file)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(DEADLINE, run)
        .await
        .unwrap_or_else(|_| panic!("pytest did not finish within {DEADLINE:?}"))
        .expect("running pytest");
    println!("{}", String::from_utf8_lossy(&output.stdout));
    assert!(
        output.status.success(),
        "pytest failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
