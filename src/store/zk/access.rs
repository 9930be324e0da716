//! Who may touch lockwarden's znodes: the ZooKeeper identity the service authenticates as,
//! and the ACL it creates every znode with.
//!
//! Without `--zk-auth` the session is unauthenticated and every znode is created
//! world-readable and world-writable (`world:anyone` with all rights), as Helix does: anyone
//! who can reach ZooKeeper can read, change or delete any lock. With
//! `--zk-auth digest:USER:PASSWORD` the session authenticates with ZooKeeper's built-in
//! `digest` scheme before its first request (the credential is replayed on every
//! reconnect), and every znode it creates (roots, records, containers, queues, waiter nodes)
//! carries one ACL entry: `digest:USER:base64(sha1(USER:PASSWORD))` with all rights. Nobody
//! else may read, write, create children, delete children, or change the ACL.
//!
//! ZooKeeper ACLs are per znode and not inherited, so znodes created before the flag was
//! set keep their old (open) ACL; docs/api.md says how to close them.
//!
//! Keeps I16's ACL half (DESIGN.md, "Invariants"): with `--zk-auth` every znode's one ACL entry is
//! the service's.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use sha1::{Digest, Sha1};
use zookeeper_client as zk;

/// A `digest:USER:PASSWORD` credential, parsed from `--zk-auth`.
#[derive(Clone, PartialEq, Eq)]
pub struct DigestAuth {
    user: String,
    password: String,
}

// Never print the password (the flag's value reaches Debug output through ServeArgs).
impl std::fmt::Debug for DigestAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "digest:{}:<redacted>", self.user)
    }
}

impl std::str::FromStr for DigestAuth {
    type Err = String;

    fn from_str(raw: &str) -> Result<Self, String> {
        let usage = "--zk-auth must be digest:USER:PASSWORD";
        let rest = raw.strip_prefix("digest:").ok_or(usage)?;
        let (user, password) = rest.split_once(':').ok_or(usage)?;
        if user.is_empty() || password.is_empty() {
            return Err(format!("{usage}, with a non-empty user and password"));
        }
        Ok(DigestAuth {
            user: user.to_owned(),
            password: password.to_owned(),
        })
    }
}

impl DigestAuth {
    /// What the client sends to authenticate: `USER:PASSWORD`.
    fn credential(&self) -> Vec<u8> {
        format!("{}:{}", self.user, self.password).into_bytes()
    }

    /// The identity ZooKeeper's digest provider derives from the credential, as it appears
    /// in an ACL: `USER:base64(sha1(USER:PASSWORD))`.
    pub fn acl_id(&self) -> String {
        let hash = Sha1::digest(self.credential());
        format!("{}:{}", self.user, STANDARD.encode(hash))
    }
}

/// The authentication and ACL of the store's sessions and znodes.
#[derive(Clone, Debug)]
pub struct ZkAccess {
    auth: Option<DigestAuth>,
    acl: Vec<zk::Acl>,
}

impl ZkAccess {
    /// No authentication; znodes open to everyone.
    pub fn open() -> Self {
        ZkAccess {
            auth: None,
            acl: zk::Acls::anyone_all().to_vec(),
        }
    }

    /// Authenticates as `auth`; znodes open to that identity alone.
    pub fn digest(auth: DigestAuth) -> Self {
        let id = zk::AuthId::new("digest", &auth.acl_id());
        ZkAccess {
            acl: vec![zk::Acl::new(zk::Permission::ALL, id)],
            auth: Some(auth),
        }
    }

    pub fn from_flag(auth: Option<DigestAuth>) -> Self {
        auth.map_or_else(Self::open, Self::digest)
    }

    /// The ACL every znode is created with.
    pub fn acls(&self) -> zk::Acls<'_> {
        zk::Acls::new(&self.acl)
    }

    /// Adds the credential to a connector, so it is sent on connect and every reconnect.
    pub(super) fn authenticate(&self, connector: zk::Connector) -> zk::Connector {
        match &self.auth {
            Some(auth) => connector.with_auth("digest", &auth.credential()),
            None => connector,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_parses_and_the_acl_id_is_zookeepers_digest() {
        let auth: DigestAuth = "digest:lockwarden:s3cret:with:colons".parse().unwrap();
        assert_eq!(auth.user, "lockwarden");
        assert_eq!(auth.password, "s3cret:with:colons");
        // As ZooKeeper's DigestAuthenticationProvider.generateDigest("super:test") computes it.
        let known: DigestAuth = "digest:super:test".parse().unwrap();
        assert_eq!(known.acl_id(), "super:D/InIHSb7yEEbrWz8b9l71RjZJU=");
        for bad in [
            "lockwarden:pw",
            "digest:",
            "digest:user",
            "digest::pw",
            "digest:u:",
        ] {
            assert!(bad.parse::<DigestAuth>().is_err(), "{bad}");
        }
        assert!(!format!("{auth:?}").contains("s3cret"));
    }

    #[test]
    fn the_acl_names_only_the_authenticated_identity() {
        let access = ZkAccess::digest("digest:u:p".parse().unwrap());
        let acls = access.acls();
        assert_eq!(acls.len(), 1);
        assert_eq!(acls[0].scheme(), "digest");
        assert_eq!(acls[0].permission(), zk::Permission::ALL);
        assert_eq!(ZkAccess::open().acls()[0].scheme(), "world");
    }
}
