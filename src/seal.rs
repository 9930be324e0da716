//! Bearer secrets at rest: the `lease_id` and `request_id` a caller holds are never stored.
//! Records and queue nodes keep their **seals**, keyed digests (HMAC-SHA-256) under the
//! server secret `--record-secret`.
//!
//! The API layer seals what a caller presents as soon as it is parsed; the service, the
//! engine and the stores only ever see, compare and write seals. A lease's seal is shaped
//! like a lease id (a UUID), so every rule that compares leases is unchanged. Whoever reads
//! ZooKeeper learns seals, and a seal is not accepted as a lease: presenting it gets it
//! sealed again, which matches nothing.
//!
//! Two facts make this work without storing secrets:
//! - A fresh lease id is random (122 bits), so its seal cannot be reversed even by someone
//!   who knows the key.
//! - A retry of an acquire with the same `request_id` must be answered with the same lease
//!   id, possibly by another instance that never saw the first call. A grant made for a
//!   `request_id` therefore gets a lease id *derived* from it: HMAC(key, lock, owner,
//!   request_id, body digest). A retry re-derives it; nobody without the key and the
//!   `request_id` can. (One `request_id` names one acquire: reused with the same body on the
//!   same lock after its grant ended, it derives the same lease id again.)
//!
//! Without `--record-secret` a built-in key is used: lease seals still cannot be reversed,
//! but a `request_id` that can be guessed can be checked against its seal, and its lease id
//! derived. Every instance must use the same secret; changing it orphans live leases.
//!
//! A record in the unsealed layout (`LW_LEASE_ID`, `LW_REQUEST_ID` in plain text) is sealed
//! as it is read (`LockRecord::decode_sealing`), so its holder keeps its lease; the next
//! write of such a record stores the seals instead.
//!
//! Keeps I9 (a grant for a `request_id` derives its lease id: `Sealer::lease_for_request`) and I16
//! (no bearer secret at rest); see DESIGN.md, "Invariants".

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::model::{LeaseId, LockName, Owner, RequestId};

/// The key used when no `--record-secret` is given (see the module doc).
const BUILT_IN_SECRET: &str = "lockwarden built-in record secret; set --record-secret";

#[derive(Clone)]
pub struct Sealer {
    key: [u8; 32],
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(<key>)")
    }
}

impl Sealer {
    /// A sealer keyed by `secret`, or by the built-in key.
    pub fn new(secret: Option<&str>) -> Self {
        let secret = secret.unwrap_or(BUILT_IN_SECRET);
        let mut hash = Sha256::new();
        hash.update(b"lockwarden record secret v1\0");
        hash.update(secret.as_bytes());
        Sealer {
            key: hash.finalize().into(),
        }
    }

    fn mac(&self, label: &str, parts: &[&[u8]]) -> [u8; 32] {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key");
        mac.update(label.as_bytes());
        for part in parts {
            // Length-prefixed, so that no two different part lists feed the same bytes.
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        mac.finalize().into_bytes().into()
    }

    /// The seal of a lease id: what records and queue nodes keep in its place.
    pub fn lease(&self, lease: &LeaseId) -> LeaseId {
        let mac = self.mac("lease", &[lease.to_string().as_bytes()]);
        LeaseId::from_random_bytes(first_16(&mac))
    }

    /// The seal of a request id.
    pub fn request(&self, request: &RequestId) -> RequestId {
        self.request_text(request.as_str())
    }

    /// The seal of a request id stored in plain text (`LW_REQUEST_ID`, the unsealed layout).
    pub fn request_text(&self, request: &str) -> RequestId {
        let mac = self.mac("request", &[request.as_bytes()]);
        let hex: String = mac[..24].iter().map(|b| format!("{b:02x}")).collect();
        RequestId::sealed(format!("s1.{hex}"))
    }

    /// The lease id of the grant an acquire with `request` (and this body digest) makes (I9).
    pub fn lease_for_request(
        &self,
        name: &LockName,
        owner: &Owner,
        request: &RequestId,
        body_digest: &str,
    ) -> LeaseId {
        let mac = self.mac(
            "lease for request",
            &[
                name.as_str().as_bytes(),
                owner.as_str().as_bytes(),
                request.as_str().as_bytes(),
                body_digest.as_bytes(),
            ],
        );
        LeaseId::from_random_bytes(first_16(&mac))
    }
}

fn first_16(mac: &[u8; 32]) -> [u8; 16] {
    let mut bytes = [0; 16];
    bytes.copy_from_slice(&mac[..16]);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seals_depend_on_the_secret_and_never_equal_what_they_seal() {
        let lease = LeaseId::random();
        let a = Sealer::new(Some("secret a"));
        let b = Sealer::new(Some("secret b"));
        assert_eq!(a.lease(&lease), a.lease(&lease));
        assert_ne!(a.lease(&lease), b.lease(&lease));
        assert_ne!(a.lease(&lease), lease);
        assert_ne!(
            a.lease(&a.lease(&lease)),
            a.lease(&lease),
            "a seal is no lease"
        );
        // Shaped like a lease id, so the stored form parses as one.
        assert!(LeaseId::parse(&a.lease(&lease).to_string()).is_ok());
        let request = RequestId::parse("retry-me").unwrap();
        assert_eq!(a.request(&request), a.request_text("retry-me"));
        assert_ne!(a.request(&request), b.request(&request));
        assert!(!a.request(&request).as_str().contains("retry-me"));
    }

    #[test]
    fn a_request_derives_one_lease_per_lock_owner_and_body() {
        let sealer = Sealer::new(None);
        let name = LockName::parse("jobs/a").unwrap();
        let other = LockName::parse("jobs/b").unwrap();
        let owner = Owner::parse("svc").unwrap();
        let request = RequestId::parse("r-1").unwrap();
        let lease = sealer.lease_for_request(&name, &owner, &request, "d1");
        assert_eq!(
            lease,
            sealer.lease_for_request(&name, &owner, &request, "d1")
        );
        assert_ne!(
            lease,
            sealer.lease_for_request(&other, &owner, &request, "d1")
        );
        assert_ne!(
            lease,
            sealer.lease_for_request(&name, &owner, &request, "d2")
        );
        assert_ne!(
            lease,
            Sealer::new(Some("x")).lease_for_request(&name, &owner, &request, "d1")
        );
    }
}
