//! The lock record's storage format: Apache Helix's ZNRecord JSON.
//!
//! A Helix client and lockwarden must read the same znode the same way, so the ten Helix
//! fields keep Helix's names, string encoding and defaults (a missing or unparsable field
//! reads as Helix's default; `OWNER` `NONE` means free). lockwarden's own facts live in
//! extra `LW_*` fields, which Helix ignores.
//!
//! Keeps I2 (DESIGN.md, "Invariants"): the token a write keeps is stored as `LW_FENCING_TOKEN`, and
//! a Helix record without it takes its last write's zxid. I11's ended lease is stored as
//! `LW_ENDED_LEASE_SEAL`, a seal as `LW_LEASE_SEAL` is; a record without it has none.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::{Expiry, Forced, Holder, LockRecord, Requestor};
use crate::model::{FencingToken, LeaseId, UnixMillis, NO_OWNER};
use crate::seal::Sealer;

impl LockRecord {
    pub fn encode(&self) -> Vec<u8> {
        let mut f: BTreeMap<&str, String> = BTreeMap::new();
        let h = self.holders.first();
        put_holder(&mut f, h);
        let r = self.requestor.as_ref();
        f.insert(
            "REQUESTOR_ID",
            r.map_or(NO_OWNER.into(), |r| r.owner.clone()),
        );
        f.insert(
            "REQUESTOR_PRIORITY",
            r.map_or(0, |r| r.priority).to_string(),
        );
        f.insert(
            "REQUESTOR_WAITING_TIMEOUT",
            ms_or_minus_one(r.and_then(|r| r.waiting_ms)),
        );
        f.insert(
            "REQUESTING_TIMESTAMP",
            r.map_or(-1, |r| r.requested_at.0).to_string(),
        );
        if let Some(r) = r {
            put(&mut f, "LW_REQUESTOR_WAITER", r.waiter.clone());
            put(
                &mut f,
                "LW_REQUESTOR_FORCEFUL",
                r.forceful.then(|| "true".to_string()),
            );
            put(
                &mut f,
                "LW_CLEANUP_DEADLINE",
                r.cleanup_deadline.map(|d| d.0.to_string()),
            );
        }
        put(&mut f, "LW_QUEUED", self.queued.map(|p| p.to_string()));
        put(
            &mut f,
            "LW_FORCED",
            self.forced.map(|f| f.as_str().to_string()),
        );
        put(
            &mut f,
            "LW_ENDED_LEASE_SEAL",
            self.ended_lease.map(|l| l.to_string()),
        );
        put(&mut f, "LW_LIMIT", self.limit.map(|l| l.to_string()));
        // A semaphore's further permits, each with the holder's fields, keyed in grant order.
        let permits: BTreeMap<String, BTreeMap<&str, String>> = self
            .holders
            .iter()
            .enumerate()
            .skip(1)
            .map(|(i, h)| {
                let mut fields = BTreeMap::new();
                put_holder(&mut fields, Some(h));
                (format!("{PERMIT_PREFIX}{i:03}"), fields)
            })
            .collect();
        // Serialised straight from the map: records are written on every lock cycle.
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct ZnRecord<'a> {
            id: &'static str,
            simple_fields: &'a BTreeMap<&'static str, String>,
            list_fields: BTreeMap<(), ()>,
            map_fields: &'a BTreeMap<String, BTreeMap<&'static str, String>>,
        }
        let doc = ZnRecord {
            id: "LOCK",
            simple_fields: &f,
            list_fields: BTreeMap::new(),
            map_fields: &permits,
        };
        serde_json::to_vec(&doc).expect("a map of strings always serialises")
    }

    /// Reads a znode's data. Empty data (a released or intermediate node) is a free lock.
    /// Data that is not a ZNRecord also reads as free, as in Helix; the error says why, so
    /// the caller can log it. A lease or request id stored in plain text (the unsealed
    /// layout) is read as it is: use [`LockRecord::decode_sealing`] to compare it with seals.
    pub fn decode(data: &[u8]) -> Result<LockRecord, String> {
        Self::decode_with(data, None)
    }

    /// Reads a znode's data like [`LockRecord::decode`], sealing any lease or request id
    /// stored in plain text (`LW_LEASE_ID`, `LW_REQUEST_ID`: the unsealed layout), so its
    /// holder keeps the lease.
    pub fn decode_sealing(data: &[u8], sealer: &Sealer) -> Result<LockRecord, String> {
        Self::decode_with(data, Some(sealer))
    }

    fn decode_with(data: &[u8], sealer: Option<&Sealer>) -> Result<LockRecord, String> {
        if data.is_empty() {
            return Ok(LockRecord::default());
        }
        let doc: Value = serde_json::from_slice(data).map_err(|e| e.to_string())?;
        let fields = doc
            .get("simpleFields")
            .and_then(Value::as_object)
            .ok_or("the record has no simpleFields object")?;
        let text = |key: &str| fields.get(key).and_then(Value::as_str);
        let long = |key: &str| text(key).and_then(|s| s.trim().parse::<i64>().ok());
        let duration = |key: &str| long(key).and_then(|v| u64::try_from(v).ok());
        let priority = |key: &str| long(key).map_or(0, |v| v.clamp(0, i64::from(i32::MAX)) as u32);

        let mut holders: Vec<Holder> = read_holder(fields, sealer).into_iter().collect();
        if let Some(permits) = doc.get("mapFields").and_then(Value::as_object) {
            // Keys sort in grant order (`encode`).
            let mut keys: Vec<&String> = permits
                .keys()
                .filter(|k| k.starts_with(PERMIT_PREFIX))
                .collect();
            keys.sort();
            for key in keys {
                if let Some(fields) = permits[key].as_object() {
                    holders.extend(read_holder(fields, sealer));
                }
            }
        }
        let requestor = match text("REQUESTOR_ID") {
            None | Some(NO_OWNER) => None,
            Some(owner) => Some(Requestor {
                owner: owner.to_owned(),
                priority: priority("REQUESTOR_PRIORITY"),
                waiting_ms: duration("REQUESTOR_WAITING_TIMEOUT"),
                requested_at: UnixMillis(long("REQUESTING_TIMESTAMP").unwrap_or(-1)),
                waiter: text("LW_REQUESTOR_WAITER").map(str::to_owned),
                forceful: text("LW_REQUESTOR_FORCEFUL") == Some("true"),
                cleanup_deadline: long("LW_CLEANUP_DEADLINE").map(UnixMillis),
            }),
        };
        // "true" (the mark's form without a priority) names none: the highest possible is
        // the safe reading.
        let queued = text("LW_QUEUED").and_then(|q| match q {
            "true" => Some(u32::MAX),
            number => number.parse().ok(),
        });
        Ok(LockRecord {
            holders,
            limit: text("LW_LIMIT").and_then(|l| l.parse().ok()),
            requestor,
            queued,
            forced: match text("LW_FORCED") {
                Some("admin") => Some(Forced::Admin),
                Some("preemption") => Some(Forced::Preemption),
                _ => None,
            },
            ended_lease: text("LW_ENDED_LEASE_SEAL").and_then(|seal| LeaseId::parse(seal).ok()),
        })
    }
}

/// The key prefix of a semaphore's second and later permits in `mapFields`.
const PERMIT_PREFIX: &str = "LW_PERMIT_";

/// Writes one holder's fields (Helix's, and lockwarden's `LW_*`); `None` writes a free
/// lock's.
fn put_holder(f: &mut BTreeMap<&'static str, String>, h: Option<&Holder>) {
    f.insert("OWNER", h.map_or(NO_OWNER.into(), |h| h.owner.clone()));
    f.insert("MESSAGE", h.map_or(NO_OWNER.into(), |h| h.message.clone()));
    let timeout = match h.map(|h| h.expires) {
        None => -1,
        Some(Expiry::Never) => i64::MAX,
        Some(Expiry::At(at)) => at.0,
    };
    f.insert("TIMEOUT", timeout.to_string());
    f.insert("PRIORITY", h.map_or(0, |h| h.priority).to_string());
    f.insert(
        "WAITING_TIMEOUT",
        ms_or_minus_one(h.and_then(|h| h.waiting_ms)),
    );
    f.insert(
        "CLEANUP_TIMEOUT",
        h.map_or("-1".into(), |h| h.cleanup_ms.to_string()),
    );
    let Some(h) = h else { return };
    put(f, "LW_LEASE_SEAL", h.lease_id.map(|l| l.to_string()));
    put(f, "LW_LEASE_MS", h.lease_ms.map(|v| v.to_string()));
    put(f, "LW_ACQUIRED_AT", h.acquired_at.map(|v| v.0.to_string()));
    put(
        f,
        "LW_FENCING_TOKEN",
        h.fencing_token.map(|t| t.0.to_string()),
    );
    put(f, "LW_FORCEFUL", h.forceful.then(|| "true".to_string()));
    put(f, "LW_NOTIFY_URL", h.notify_url.clone());
    put(f, "LW_REQUEST_SEAL", h.request_id.clone());
    put(f, "LW_REQUEST_DIGEST", h.request_digest.clone());
}

/// Reads one holder from its fields (see `put_holder`); `None` when they say "free".
fn read_holder(fields: &serde_json::Map<String, Value>, sealer: Option<&Sealer>) -> Option<Holder> {
    let text = |key: &str| fields.get(key).and_then(Value::as_str);
    let long = |key: &str| text(key).and_then(|s| s.trim().parse::<i64>().ok());
    let duration = |key: &str| long(key).and_then(|v| u64::try_from(v).ok());
    let owner = match text("OWNER") {
        None | Some(NO_OWNER) => return None,
        Some(owner) => owner,
    };
    Some(Holder {
        owner: owner.to_owned(),
        message: text("MESSAGE").unwrap_or_default().to_owned(),
        expires: match long("TIMEOUT").unwrap_or(-1) {
            i64::MAX => Expiry::Never,
            at => Expiry::At(UnixMillis(at)),
        },
        priority: long("PRIORITY").map_or(0, |v| v.clamp(0, i64::from(i32::MAX)) as u32),
        waiting_ms: duration("WAITING_TIMEOUT"),
        cleanup_ms: duration("CLEANUP_TIMEOUT").unwrap_or(0),
        forceful: text("LW_FORCEFUL") == Some("true"),
        lease_id: match text("LW_LEASE_SEAL") {
            Some(seal) => LeaseId::parse(seal).ok(),
            None => text("LW_LEASE_ID")
                .and_then(|s| LeaseId::parse(s).ok())
                .map(|plain| sealer.map_or(plain, |s| s.lease(&plain))),
        },
        lease_ms: duration("LW_LEASE_MS"),
        acquired_at: long("LW_ACQUIRED_AT").map(UnixMillis),
        fencing_token: duration("LW_FENCING_TOKEN").map(FencingToken),
        notify_url: text("LW_NOTIFY_URL").map(str::to_owned),
        request_id: match text("LW_REQUEST_SEAL") {
            Some(seal) => Some(seal.to_owned()),
            None => text("LW_REQUEST_ID").map(|plain| match sealer {
                Some(s) => s.request_text(plain).as_str().to_owned(),
                None => plain.to_owned(),
            }),
        },
        request_digest: text("LW_REQUEST_DIGEST").map(str::to_owned),
    })
}

fn ms_or_minus_one(ms: Option<u64>) -> String {
    ms.map_or("-1".into(), |v| v.to_string())
}

fn put(fields: &mut BTreeMap<&'static str, String>, key: &'static str, value: Option<String>) {
    if let Some(value) = value {
        fields.insert(key, value);
    }
}

#[cfg(test)]
#[path = "znrecord_tests.rs"]
mod tests;
