//! Identifier newtypes and their validation rules.
//!
//! Everything a client names (locks, owners, leases, request ids) is parsed into one of these
//! types at the edge, so the rest of the service never sees an unvalidated string.

use std::cmp::Ordering;
use std::fmt;

use uuid::Uuid;

/// The longest lock name, in bytes.
pub const MAX_NAME_BYTES: usize = 512;
/// The most parts a lock name may have.
pub const MAX_NAME_PARTS: usize = 16;
/// The longest part of a lock name, in bytes.
pub const MAX_PART_BYTES: usize = 128;
/// The owner string that Helix uses to mean "nobody"; no caller may use it.
pub const NO_OWNER: &str = "NONE";

/// `--max-lease-ms` by default: the longest lease (and cleanup window) a caller may ask for.
pub const DEFAULT_MAX_LEASE_MS: u64 = 86_400_000;

/// `--max-waiting-ms` by default: the longest a caller may ask to wait.
pub const DEFAULT_MAX_WAITING_MS: u64 = 300_000;

/// A validated lock name: 1–16 parts joined by `/`, each `[A-Za-z0-9._-]{1,128}`, not `.`/`..`.
///
/// Names order part by part, so a lock sorts directly before the locks nested under it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LockName(String);

impl LockName {
    pub fn parse(raw: &str) -> Result<Self, String> {
        if raw.is_empty() {
            return Err("lock name is empty".into());
        }
        if raw.len() > MAX_NAME_BYTES {
            return Err(format!("lock name is longer than {MAX_NAME_BYTES} bytes"));
        }
        let parts: Vec<&str> = raw.split('/').collect();
        if parts.len() > MAX_NAME_PARTS {
            return Err(format!("lock name has more than {MAX_NAME_PARTS} parts"));
        }
        for part in parts {
            validate_part(part)?;
        }
        Ok(LockName(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn parts(&self) -> impl Iterator<Item = &str> {
        self.0.split('/')
    }
}

fn validate_part(part: &str) -> Result<(), String> {
    if part.is_empty() {
        return Err("lock name has an empty part (a leading, trailing or doubled '/')".into());
    }
    if part.len() > MAX_PART_BYTES {
        return Err(format!(
            "a part of the lock name is longer than {MAX_PART_BYTES} bytes"
        ));
    }
    if part == "." || part == ".." {
        return Err("a part of the lock name is '.' or '..'".into());
    }
    if let Some(bad) = part
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "lock name contains {bad:?}; parts may contain only A-Z, a-z, 0-9, '.', '_' and '-'"
        ));
    }
    Ok(())
}

impl Ord for LockName {
    fn cmp(&self, other: &Self) -> Ordering {
        self.parts().cmp(other.parts())
    }
}

impl PartialOrd for LockName {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for LockName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// True for the characters an identifier may not contain and a log line must not carry
/// raw: control characters (C0, DEL, C1), the Unicode line and paragraph separators, and
/// the bidirectional-text controls. Each of them can forge or hide text where the string is
/// shown: a new line in a log, or a name displayed in reverse ("Trojan Source").
pub fn is_unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' // line and paragraph separators
            | '\u{200E}' | '\u{200F}' | '\u{061C}' // LRM, RLM, ALM
            | '\u{202A}'..='\u{202E}' // embeddings and overrides
            | '\u{2066}'..='\u{2069}' // isolates
        )
}

/// `text` for a log line: every [`is_unsafe_char`] (and `\\`) escaped as Rust does
/// (`\n`, `\u{202e}`), everything else as is, so one value always stays on one line and
/// reads in its true order.
pub fn escape_for_log(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            // Not `escape_debug`, which leaves some format characters (bidi marks) raw.
            c if is_unsafe_char(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    out
}

/// Who holds or asks for a lock: 1–256 characters, none of them [`is_unsafe_char`], never
/// `NONE`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Owner(String);

impl Owner {
    pub fn parse(raw: &str) -> Result<Self, String> {
        let len = raw.chars().count();
        if len == 0 || len > 256 {
            return Err("owner must be 1 to 256 characters".into());
        }
        if let Some(bad) = raw.chars().find(|&c| is_unsafe_char(c)) {
            return Err(format!(
                "owner contains {bad:?}; control characters, line and paragraph separators \
                 and bidirectional-text controls are not allowed"
            ));
        }
        if raw == NO_OWNER {
            return Err("owner may not be \"NONE\", which means \"no owner\" in the record".into());
        }
        Ok(Owner(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The secret handle of one grant: whoever presents it may renew or release that lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct LeaseId(Uuid);

impl LeaseId {
    pub fn random() -> Self {
        LeaseId(Uuid::new_v4())
    }

    pub fn parse(raw: &str) -> Result<Self, String> {
        Uuid::parse_str(raw)
            .map(LeaseId)
            .map_err(|_| "lease_id is not a UUID".to_string())
    }

    /// A version-4 UUID made of the given bytes (a derived lease id, or a seal).
    pub fn from_random_bytes(bytes: [u8; 16]) -> Self {
        LeaseId(uuid::Builder::from_random_bytes(bytes).into_uuid())
    }
}

impl fmt::Display for LeaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.hyphenated().fmt(f)
    }
}

/// A caller-chosen idempotency key (1–128 printable characters).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RequestId(String);

impl RequestId {
    pub fn parse(raw: &str) -> Result<Self, String> {
        let len = raw.chars().count();
        if len == 0 || len > 128 || raw.chars().any(char::is_control) {
            return Err("request_id must be 1 to 128 printable characters".into());
        }
        Ok(RequestId(raw.to_owned()))
    }

    /// A request id's seal (see `crate::seal`), which stands in for it past the API.
    pub(crate) fn sealed(seal: String) -> Self {
        RequestId(seal)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The token that orders grants: the zxid of the ZooKeeper write that granted ownership.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FencingToken(pub u64);

/// A lock priority, 0..=2147483647; higher wins. The top value is the SRE override.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Priority(u32);

impl Priority {
    /// Priority 2147483647, reserved for emergency overrides by an admin.
    pub const OVERRIDE: Priority = Priority(i32::MAX as u32);

    pub fn new(value: i64) -> Result<Self, String> {
        if (0..=i64::from(i32::MAX)).contains(&value) {
            Ok(Priority(value as u32))
        } else {
            Err("priority must be between 0 and 2147483647".into())
        }
    }

    pub fn get(self) -> u32 {
        self.0
    }
}

/// Milliseconds since the Unix epoch, on the service's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UnixMillis(pub i64);

impl UnixMillis {
    pub fn plus(self, ms: u64) -> UnixMillis {
        UnixMillis(self.0.saturating_add(i64::try_from(ms).unwrap_or(i64::MAX)))
    }

    pub fn minus(self, ms: u64) -> UnixMillis {
        UnixMillis(self.0.saturating_sub(i64::try_from(ms).unwrap_or(i64::MAX)))
    }

    /// Milliseconds from `self` until `later`; 0 once `later` has passed.
    pub fn millis_until(self, later: UnixMillis) -> u64 {
        u64::try_from(later.0.saturating_sub(self.0)).unwrap_or(0)
    }

    /// RFC 3339 UTC with milliseconds; `None` outside the years 0000–9999.
    pub fn rfc3339(self) -> Option<String> {
        let when =
            time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(self.0) * 1_000_000).ok()?;
        when.format(time::macros::format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
        ))
        .ok()
    }

    pub fn now() -> UnixMillis {
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        UnixMillis(i64::try_from(since.as_millis()).unwrap_or(i64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_names_follow_the_contract() {
        for ok in ["a", "payments/migrate", "A.b_c-9", &"x".repeat(128)] {
            assert!(LockName::parse(ok).is_ok(), "{ok}");
        }
        let sixteen = vec!["p"; 16].join("/");
        assert!(LockName::parse(&sixteen).is_ok());
        let seventeen = vec!["p"; 17].join("/");
        let too_long = vec!["x".repeat(100); 6].join("/");
        for bad in [
            "",
            "/a",
            "a/",
            "a//b",
            ".",
            "..",
            "a/../b",
            "a b",
            "ä",
            "a%2Fb",
            &"x".repeat(129),
            &seventeen,
            &too_long,
        ] {
            assert!(LockName::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn log_escaping_keeps_one_line_and_the_true_order() {
        assert_eq!(escape_for_log("plain zoë"), "plain zoë");
        assert_eq!(escape_for_log("a\nb\r\tc"), "a\\nb\\r\\tc");
        assert_eq!(
            escape_for_log("x\u{2028}y\u{202E}z"),
            "x\\u{2028}y\\u{202e}z"
        );
        assert_eq!(escape_for_log("back\\slash"), "back\\\\slash");
    }

    #[test]
    fn names_order_part_by_part() {
        let a = LockName::parse("a").unwrap();
        let a_b = LockName::parse("a/b").unwrap();
        let a_dash = LockName::parse("a-x").unwrap();
        assert!(a < a_b && a_b < a_dash);
    }

    #[test]
    fn owners_and_priorities_are_bounded() {
        assert!(Owner::parse("deploy-bot").is_ok());
        assert!(Owner::parse("NONE").is_err());
        assert!(Owner::parse("").is_err());
        assert!(Owner::parse("a\nb").is_err());
        for bad in [
            '\u{0}', '\u{1b}', '\u{7f}', '\u{85}', '\u{2028}', '\u{2029}',
        ] {
            assert!(Owner::parse(&format!("a{bad}b")).is_err(), "{bad:?}");
        }
        for bidi in [
            '\u{200E}', '\u{200F}', '\u{061C}', '\u{202A}', '\u{202E}', '\u{2066}', '\u{2069}',
        ] {
            assert!(Owner::parse(&format!("a{bidi}b")).is_err(), "{bidi:?}");
        }
        assert!(Owner::parse("zoë 日本 🙂").is_ok());
        assert!(Owner::parse(&"é".repeat(256)).is_ok());
        assert!(Owner::parse(&"é".repeat(257)).is_err());
        assert!(Priority::new(-1).is_err());
        assert_eq!(Priority::new(2147483647).unwrap(), Priority::OVERRIDE);
        assert!(Priority::new(2147483648).is_err());
    }
}
