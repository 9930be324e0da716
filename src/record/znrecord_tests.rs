//! The ZNRecord format's tests: round trips, Helix's names and defaults, sealing.

use super::*;

fn sample() -> Holder {
    Holder {
        owner: "deploy-bot".into(),
        message: "schema migration".into(),
        expires: Expiry::At(UnixMillis(1_800_000_000_000)),
        priority: 5,
        waiting_ms: Some(2000),
        cleanup_ms: 100,
        forceful: true,
        lease_id: Some(LeaseId::random()),
        lease_ms: Some(30_000),
        acquired_at: Some(UnixMillis(1_799_999_970_000)),
        fencing_token: Some(FencingToken(4_294_967_401)),
        notify_url: Some("http://127.0.0.1:9/hook".into()),
        request_id: Some("req-1".into()),
        request_digest: Some("abc".into()),
    }
}

#[test]
fn a_record_survives_a_round_trip() {
    let record = LockRecord {
        holders: vec![sample()],
        limit: None,
        requestor: Some(Requestor {
            owner: "sre".into(),
            priority: 9,
            waiting_ms: None,
            requested_at: UnixMillis(1_799_999_999_000),
            waiter: Some("0000000001-abc-0000000007".into()),
            forceful: true,
            cleanup_deadline: Some(UnixMillis(1_800_000_000_100)),
        }),
        queued: Some(9),
        forced: Some(Forced::Preemption),
        ended_lease: Some(LeaseId::random()),
    };
    assert_eq!(LockRecord::decode(&record.encode()).unwrap(), record);
    let free = LockRecord {
        forced: Some(Forced::Admin),
        ended_lease: Some(LeaseId::random()),
        ..LockRecord::default()
    };
    assert_eq!(LockRecord::decode(&free.encode()).unwrap(), free);
    let free = LockRecord::default();
    assert_eq!(LockRecord::decode(&free.encode()).unwrap(), free);
}

#[test]
fn helix_fields_are_strings_with_helix_names() {
    let doc: Value = serde_json::from_slice(&LockRecord::default().encode()).unwrap();
    assert_eq!(doc["id"], "LOCK");
    let f = &doc["simpleFields"];
    assert_eq!(f["OWNER"], "NONE");
    assert_eq!(f["TIMEOUT"], "-1");
    assert_eq!(f["PRIORITY"], "0");
    assert_eq!(f["REQUESTING_TIMESTAMP"], "-1");
}

#[test]
fn a_helix_record_reads_with_helix_defaults() {
    let raw = br#"{"id":"x","simpleFields":{"OWNER":"u1","TIMEOUT":"9223372036854775807",
        "MESSAGE":"Test","CLEANUP_TIMEOUT":"oops","REQUESTOR_ID":null},"listFields":{},"mapFields":{}}"#;
    let record = LockRecord::decode(raw).unwrap();
    let holder = record.holder().unwrap();
    assert_eq!(holder.owner, "u1");
    assert_eq!(holder.priority, 0, "a missing PRIORITY reads as 0");
    assert_eq!(holder.expires, Expiry::Never);
    assert_eq!(holder.cleanup_ms, 0);
    assert_eq!(holder.lease_id, None);
    assert!(record.requestor.is_none());
    assert_eq!(
        record.ended_lease, None,
        "a record without LW_ENDED_LEASE_SEAL"
    );
}

#[test]
fn plain_ids_of_the_previous_version_are_sealed_as_read_and_never_written_back() {
    let sealer = Sealer::new(Some("k"));
    let lease = LeaseId::random();
    let raw = format!(
        r#"{{"simpleFields":{{"OWNER":"u1","TIMEOUT":"1","LW_LEASE_ID":"{lease}","LW_REQUEST_ID":"r-9"}}}}"#
    );
    let record = LockRecord::decode_sealing(raw.as_bytes(), &sealer).unwrap();
    let holder = record.holder().unwrap();
    assert_eq!(holder.lease_id, Some(sealer.lease(&lease)));
    let sealed_request = sealer.request_text("r-9");
    assert_eq!(holder.request_id.as_deref(), Some(sealed_request.as_str()));
    let written = String::from_utf8(record.encode()).unwrap();
    assert!(!written.contains(&lease.to_string()) && !written.contains("\"r-9\""));
    assert!(!written.contains("LW_LEASE_ID") && !written.contains("LW_REQUEST_ID"));
    // Seals are read as they are, with or without a sealer.
    let again = LockRecord::decode_sealing(written.as_bytes(), &sealer).unwrap();
    assert_eq!(again, record);
    assert_eq!(LockRecord::decode(written.as_bytes()).unwrap(), record);
}

#[test]
fn empty_or_foreign_data_reads_as_free() {
    assert!(LockRecord::decode(b"").unwrap().is_free());
    assert!(LockRecord::decode(b"not json").is_err());
    let no_owner = LockRecord::decode(br#"{"simpleFields":{}}"#).unwrap();
    assert!(no_owner.is_free());
}
