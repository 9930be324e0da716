//! Event ids: the zxid of the write an event reports, with a sequence number for events
//! that have no write of their own (`zxid.n`). Ordered by (zxid, n).
//!
//! Keeps I14's growing ids (DESIGN.md, "Invariants").

use std::fmt;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventId {
    pub zxid: i64,
    pub seq: u32,
}

impl EventId {
    /// The id after `self` for an event about a write at `zxid` (or none): the write's own
    /// zxid when it is newer, else `self` with the next sequence number.
    pub fn next(self, zxid: Option<i64>) -> EventId {
        match zxid {
            Some(zxid) if zxid > self.zxid => EventId { zxid, seq: 0 },
            _ => EventId {
                zxid: self.zxid,
                seq: self.seq + 1,
            },
        }
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.seq {
            0 => write!(f, "{}", self.zxid),
            seq => write!(f, "{}.{seq}", self.zxid),
        }
    }
}

impl FromStr for EventId {
    type Err = String;

    fn from_str(raw: &str) -> Result<Self, String> {
        let bad = || format!("{raw:?} is not an event id");
        let (zxid, seq) = raw.split_once('.').unwrap_or((raw, "0"));
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(zxid) || !digits(seq) {
            return Err(bad());
        }
        Ok(EventId {
            zxid: zxid.parse().map_err(|_| bad())?,
            seq: seq.parse().map_err(|_| bad())?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_only_grow_and_round_trip() {
        let start = EventId::default();
        let a = start.next(Some(10));
        let b = a.next(None);
        let c = b.next(Some(9));
        let d = c.next(Some(11));
        assert!(start < a && a < b && b < c && c < d);
        assert_eq!(
            (a.to_string(), b.to_string(), c.to_string()),
            ("10".into(), "10.1".into(), "10.2".into())
        );
        for id in [a, b, c, d] {
            assert_eq!(id.to_string().parse::<EventId>(), Ok(id));
        }
        for bad in ["", "x", "1.", ".1", "-1", "1.2.3", "+1"] {
            assert!(bad.parse::<EventId>().is_err(), "{bad}");
        }
    }
}
