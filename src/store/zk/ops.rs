//! A record write as owned ZooKeeper operations that must commit together, in order: what a
//! write hands to the coalescer (`batch.rs`), which stages it into whichever `multi` carries
//! it. Also the two shapes every record write takes (`create_record`, `set_record`), which
//! keep the version rule the collector's fence relies on.
//!
//! Keeps I2 (`written`: the token is the granting write's zxid) and I13 (`set_record`,
//! `create_record`); see DESIGN.md, "Invariants".

use zookeeper_client as zk;

enum Op {
    Create {
        path: String,
        data: Vec<u8>,
        mode: zk::CreateMode,
    },
    SetData {
        path: String,
        data: Vec<u8>,
        version: i32,
    },
    Delete {
        path: String,
        version: Option<i32>,
    },
}

/// Operations of one write, applied in order and all or none.
#[derive(Default)]
pub(crate) struct Ops {
    ops: Vec<Op>,
}

impl Ops {
    /// A create; its ACLs are the store's (every node lockwarden makes has them).
    pub(crate) fn create(&mut self, path: String, data: Vec<u8>, mode: zk::CreateMode) {
        self.ops.push(Op::Create { path, data, mode });
    }

    pub(crate) fn set_data(&mut self, path: String, data: Vec<u8>, version: i32) {
        self.ops.push(Op::SetData {
            path,
            data,
            version,
        });
    }

    pub(crate) fn delete(&mut self, path: String, version: Option<i32>) {
        self.ops.push(Op::Delete { path, version });
    }

    /// Creates a record. It is created empty and written in the same transaction, so a
    /// record never sits at version 0: version 0 only ever names an empty (container) node,
    /// and a write conditioned on it can never land on a record created in its place. The
    /// write also yields a valid Stat, which a create inside a multi does not on ZooKeeper
    /// 3.8.0 (ZOOKEEPER-4026).
    pub(crate) fn create_record(&mut self, path: String, data: Vec<u8>) {
        self.create(path.clone(), Vec::new(), zk::CreateMode::Persistent);
        self.set_record(path, data, 0);
    }

    /// Writes a record at version `number` and leaves it at an **even** version: one setData
    /// from an odd version, two (the first writes nothing) from an even one. Live records
    /// therefore never sit at an odd version; odd versions belong to fenced free records
    /// (see `store::collect`), so a write planned on a fenced record can only ever land on a
    /// fenced record, never on a live one created in its place (I13).
    pub(crate) fn set_record(&mut self, path: String, data: Vec<u8>, number: i32) {
        if number.rem_euclid(2) == 0 {
            self.set_data(path.clone(), Vec::new(), number);
            self.set_data(path, data, number + 1);
        } else {
            self.set_data(path, data, number);
        }
    }

    /// The paths of the nodes the operations touch.
    pub(crate) fn paths(&self) -> impl Iterator<Item = &str> {
        self.ops.iter().map(|op| match op {
            Op::Create { path, .. } | Op::SetData { path, .. } | Op::Delete { path, .. } => {
                path.as_str()
            }
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.ops.len()
    }

    /// Roughly what the operations weigh in a request: their paths and data.
    pub(crate) fn bytes(&self) -> usize {
        self.ops
            .iter()
            .map(|op| match op {
                Op::Create { path, data, .. } | Op::SetData { path, data, .. } => {
                    path.len() + data.len()
                }
                Op::Delete { path, .. } => path.len(),
            })
            .sum()
    }

    /// Adds the operations to `writer`. An error (a path the client refuses) leaves the
    /// writer unusable; the caller then sends nothing.
    pub(crate) fn stage(
        &self,
        writer: &mut zk::MultiWriter<'_>,
        acls: zk::Acls<'_>,
    ) -> Result<(), zk::Error> {
        self.ops.iter().try_for_each(|op| match op {
            Op::Create { path, data, mode } => writer.add_create(path, data, &mode.with_acls(acls)),
            Op::SetData {
                path,
                data,
                version,
            } => writer.add_set_data(path, data, Some(*version)),
            Op::Delete { path, version } => writer.add_delete(path, *version),
        })
    }
}

/// The zxid and version a committed record write left, from its last setData result.
pub(crate) fn written(
    results: &[zk::MultiWriteResult],
    session: i64,
) -> Result<crate::store::WriteOutcome, crate::store::StoreError> {
    results
        .iter()
        .rev()
        .find_map(|r| match r {
            zk::MultiWriteResult::SetData { stat } => Some(crate::store::WriteOutcome::Written {
                zxid: stat.mzxid,
                version: crate::store::Version::written(stat.version, session),
            }),
            _ => None,
        })
        .ok_or_else(|| {
            crate::store::StoreError::OutcomeUnknown("a record write returned no stat".into())
        })
}
