//! Takes a lock, does some "work" while the guard renews it, and lets go early if the
//! lease is lost or a higher priority asks for the lock.
//!
//! ```sh
//! cargo run -p lockwarden -- serve &      # a service on 127.0.0.1:8080
//! cargo run -p lockwarden-client --example hold -- reports/nightly
//! ```

use std::time::Duration;

use lockwarden_client::{Client, Error};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let name = std::env::args().nth(1).unwrap_or_else(|| "example".into());
    let url = std::env::var("LOCKWARDEN_ADDR").unwrap_or_else(|_| "http://127.0.0.1:8080".into());
    let mut client = Client::new(url);
    if let Ok(token) = std::env::var("LOCKWARDEN_TOKEN") {
        client = client.token(token);
    }
    let guard = client
        .lock(&name)
        .lease(Duration::from_secs(6))
        .wait(Duration::from_secs(30))
        .cleanup(Duration::from_secs(5))
        .message("the lockwarden-client example")
        .acquire()
        .await?;
    println!(
        "holding {} with fencing token {} (lease {})",
        guard.name(),
        guard.fencing_token(),
        guard.lease_id()
    );
    // Stands in for real work that passes the fencing token to what it writes to.
    let work = tokio::time::sleep(Duration::from_secs(20));
    tokio::select! {
        reason = guard.lost() => {
            eprintln!("lost the lock: {reason}; stopping without it");
            return Ok(());
        }
        request = guard.cleanup_requested() => {
            eprintln!("{} (priority {}) asks for the lock; cleaning up",
                request.requestor.owner, request.requestor.priority);
        }
        () = work => println!("done"),
    }
    guard.release().await
}
