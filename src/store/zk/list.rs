//! Listing locks: a depth-first walk of the lock tree, in name order, that skips whole
//! subtrees which cannot hold a wanted name and reads candidate znodes in pipelined batches.

use std::future::Future;
use std::pin::Pin;
use tokio::time::Instant;

use futures::future::join_all;
use zookeeper_client as zk;

use super::{Late, NoAnswer};
use crate::metrics::zookeeper::{ZkMetrics, ZkOp};
use crate::model::LockName;
use crate::record::LockRecord;
use crate::store::{ListPage, ListQuery};

/// How many znodes are read at once; the client pipelines them on one connection.
const READ_BATCH: usize = 64;

type Failure = Result<zk::Error, NoAnswer>;
type Walk<'a> = Pin<Box<dyn Future<Output = Result<(), Failure>> + Send + 'a>>;

/// True when `name` itself is wanted (whatever its record says).
fn wanted(query: &ListQuery, name: &LockName) -> bool {
    name.as_str().starts_with(&query.prefix)
        && query.after.as_ref().is_none_or(|after| name > after)
        && query
            .within
            .as_ref()
            .is_none_or(|w| w.covers(name.as_str()))
}

/// True when `name` or a lock nested under it may be wanted.
fn subtree_may_match(query: &ListQuery, name: &LockName) -> bool {
    let nested = format!("{name}/");
    let prefix_ok = name.as_str().starts_with(&query.prefix) || query.prefix.starts_with(&nested);
    let cursor_ok = query
        .after
        .as_ref()
        .is_none_or(|after| name > after || after == name || after.as_str().starts_with(&nested));
    let scope_ok = query
        .within
        .as_ref()
        .is_none_or(|w| w.may_cover_below(name.as_str()));
    prefix_ok && cursor_ok && scope_ok
}

pub(super) fn walk<'a>(
    metrics: &'a ZkMetrics,
    client: &'a zk::Client,
    dir: &'a str,
    parents: Vec<String>,
    query: &'a ListQuery,
    page: &'a mut ListPage,
    deadline: Instant,
) -> Walk<'a> {
    Box::pin(async move {
        let late = Late::sent(ZkOp::GetChildren, deadline);
        let listed = metrics.time(ZkOp::GetChildren, client.list_children(dir));
        let mut children = match tokio::time::timeout_at(deadline, listed).await {
            Ok(Ok(children)) => children,
            Ok(Err(zk::Error::NoNode)) => return Ok(()),
            Ok(Err(e)) => return Err(Ok(e)),
            Err(_) => return Err(Err(NoAnswer::TimedOut(late))),
        };
        children.sort_unstable();
        // On the cursor's own path, everything before the cursor's part is skipped at once:
        // a page then costs its own reads, not a parse of every name before it.
        let depth = parents.len();
        let start = match &query.after {
            Some(after)
                if after
                    .parts()
                    .take(depth)
                    .eq(parents.iter().map(String::as_str)) =>
            {
                let part = after.parts().nth(depth).unwrap_or_default();
                children.partition_point(|c| c.as_str() < part)
            }
            _ => 0,
        };
        let mut candidates = children[start..].iter().filter_map(|child| {
            let mut parts = parents.clone();
            parts.push(child.clone());
            // A znode whose name is not a valid lock name was not written by lockwarden.
            let name = LockName::parse(&parts.join("/")).ok()?;
            subtree_may_match(query, &name).then(|| (child.clone(), name))
        });
        loop {
            let batch: Vec<(String, LockName)> = candidates.by_ref().take(READ_BATCH).collect();
            if batch.is_empty() {
                break;
            }
            let batch = batch.as_slice();
            let reads = join_all(batch.iter().map(|(child, _)| {
                metrics.time(ZkOp::GetData, client.get_data(&format!("{dir}/{child}")))
            }));
            let late = Late::sent(ZkOp::GetData, deadline);
            let results = tokio::time::timeout_at(deadline, reads)
                .await
                .map_err(|_| Err(NoAnswer::TimedOut(late)))?;
            for ((child, name), result) in batch.iter().zip(results) {
                let (data, stat) = match result {
                    Ok(found) => found,
                    Err(zk::Error::NoNode) => continue,
                    Err(e) => return Err(Ok(e)),
                };
                if wanted(query, name) {
                    if let Ok(mut record) = LockRecord::decode(&data) {
                        if crate::store::listed(query, name, &record) {
                            if page.locks.len() == query.limit {
                                page.more = true;
                                return Ok(());
                            }
                            record.resolve_token(stat.mzxid);
                            page.locks.push((name.clone(), record));
                        }
                    }
                }
                if stat.num_children > 0 {
                    let path = format!("{dir}/{child}");
                    let parts: Vec<String> = name.parts().map(str::to_owned).collect();
                    walk(metrics, client, &path, parts, query, page, deadline).await?;
                    if page.more {
                        return Ok(());
                    }
                }
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(prefix: &str, after: Option<&str>) -> ListQuery {
        ListQuery {
            prefix: prefix.into(),
            after: after.map(|a| LockName::parse(a).unwrap()),
            limit: 10,
            free: false,
            within: None,
        }
    }

    fn name(s: &str) -> LockName {
        LockName::parse(s).unwrap()
    }

    #[test]
    fn subtrees_are_skipped_by_prefix() {
        assert!(subtree_may_match(&query("pay", None), &name("payments")));
        assert!(subtree_may_match(
            &query("payments/mi", None),
            &name("payments")
        ));
        assert!(!subtree_may_match(
            &query("payments/mi", None),
            &name("pay")
        ));
        assert!(!subtree_may_match(&query("ab", None), &name("a")));
    }

    #[test]
    fn subtrees_are_skipped_by_scope() {
        let prefix = crate::scope::NamePrefix::parse("team/a/").unwrap();
        let mut within = query("", None);
        within.within = Some(std::sync::Arc::new(
            crate::scope::Prefixes::new(vec![prefix]).unwrap(),
        ));
        assert!(subtree_may_match(&within, &name("team")));
        assert!(!wanted(&within, &name("team")));
        assert!(subtree_may_match(&within, &name("team/a")));
        assert!(wanted(&within, &name("team/a/x")));
        assert!(!subtree_may_match(&within, &name("team/ab")));
        assert!(!subtree_may_match(&within, &name("other")));
    }

    #[test]
    fn subtrees_are_skipped_by_cursor() {
        let after_a_b = query("", Some("a/b"));
        assert!(
            subtree_may_match(&after_a_b, &name("a")),
            "the cursor is inside a"
        );
        assert!(!wanted(&after_a_b, &name("a")));
        assert!(!subtree_may_match(&query("", Some("b")), &name("a")));
        assert!(subtree_may_match(&query("", Some("a")), &name("b")));
    }
}
