//! A Rust client for lockwarden, an HTTP lock service: named, leased, prioritised locks
//! with fencing tokens.
//!
//! The crate owns the client side of the protocol: it takes a lock (retrying transient
//! failures with one `request_id`, so a retry never takes a second lease), renews the lease
//! in the background, and tells the holder when the lease is lost or when a higher priority
//! asks it to clean up, from the renewal answers and, when the service offers one, from the
//! lock's event stream. An election's leadership (`Client::election`) is kept the same way,
//! and `Client::observe` follows who leads.
//!
//! ```no_run
//! use std::time::Duration;
//! use lockwarden_client::Client;
//!
//! # async fn run() -> Result<(), lockwarden_client::Error> {
//! let client = Client::new("http://127.0.0.1:8080").token("secret");
//! let guard = client
//!     .lock("payments/migrate")
//!     .lease(Duration::from_secs(30))
//!     .wait(Duration::from_secs(10))
//!     .message("schema migration")
//!     .acquire()
//!     .await?;
//! println!("holding with fencing token {}", guard.fencing_token());
//! tokio::select! {
//!     reason = guard.lost() => eprintln!("lost the lock: {reason}"),
//!     request = guard.cleanup_requested() => {
//!         eprintln!("{} wants the lock; cleaning up", request.requestor.owner);
//!         guard.release().await?;
//!     }
//!     () = do_the_work() => guard.release().await?,
//! }
//! # Ok(())
//! # }
//! # async fn do_the_work() {}
//! ```
//!
//! The crate reads no environment variables and installs no signal handlers: that is the
//! business of the program using it (the `lockwarden` CLI reads `LOCKWARDEN_ADDR` and
//! `LOCKWARDEN_TOKEN`). It needs a tokio runtime with the time driver.

mod acquire;
mod call;
mod client;
mod election;
mod error;
mod events;
mod guard;
mod keeper;
mod kind;
mod permit;
mod sse;
mod tls;
mod types;

pub use acquire::LockRequest;
pub use client::Client;
pub use election::{CampaignRequest, Leadership};
pub use error::Error;
pub use events::{Event, Watch};
pub use guard::{CleanupRequest, LockGuard, LossReason};
pub use permit::{Permit, SemaphoreInfo, SemaphorePage};
pub use types::{
    ElectionInfo, ElectionPage, FencingToken, ForceReleased, Leader, LeaseId, LockInfo, LockPage,
    LockState, RequestId, Requestor,
};
