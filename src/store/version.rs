//! The version of a stored record: what a conditional write names, and what the service may
//! ask of it. What it is made of is ZooKeeper's, and stays in `src/store`.

/// Identifies the exact state a record was read in. What it is made of is the store's (on
/// ZooKeeper: the znode's version, whether it holds data or children, the session it was
/// read on, and the id of the write that left it); the service only hands it back with a
/// conditional write and asks it the questions below.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Version {
    pub(in crate::store) number: i32,
    /// ZooKeeper only: the znode holds no data. It may be a container (an intermediate node
    /// of nested names), which the server reaps, so a record is never written into it.
    pub(in crate::store) empty: bool,
    pub(in crate::store) has_children: bool,
    /// The store session the record was read on (0: any). A conditional write is sent only
    /// on that same session, so a write planned before a pause longer than the session
    /// timeout can never land after it: that session is dead, and the write with it.
    pub(in crate::store) session: i64,
    /// The id of the write that left the record in this state (0: unknown). Two reads with
    /// the same `mzxid` saw the same state, even across a delete and re-create.
    pub(in crate::store) mzxid: i64,
}

impl Version {
    pub fn plain(number: i32) -> Self {
        Version {
            number,
            empty: false,
            has_children: false,
            session: 0,
            mzxid: 0,
        }
    }

    /// The version a write planned on session `session` left behind.
    pub fn written(number: i32, session: i64) -> Self {
        Version {
            session,
            ..Version::plain(number)
        }
    }

    /// A count of the record's writes: a later state of the same record has a higher one
    /// (a deleted and re-created record starts again).
    pub fn number(&self) -> i32 {
        self.number
    }

    /// The id of the write that left the record in this state (0: unknown), as
    /// `WriteOutcome::Written`'s `zxid` names it: equal ids mean the same state, even
    /// across a delete and re-create.
    pub fn zxid(&self) -> i64 {
        self.mzxid
    }

    /// Whether more than one write may lie between `earlier` and this state of the same
    /// record. On ZooKeeper lockwarden's writes move a record on by two versions (one from an
    /// odd, fenced version), so a gap of more than two is several writes.
    pub fn several_writes_after(&self, earlier: &Version) -> bool {
        self.number - earlier.number > 2
    }

    /// Whether a record is stored here: not an empty node (on ZooKeeper, a container of
    /// nested names, which the server reaps and no record is written into).
    pub fn holds_record(&self) -> bool {
        !self.empty
    }

    /// Whether nested names live under this one.
    pub fn has_nested(&self) -> bool {
        self.has_children
    }
}
