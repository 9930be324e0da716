//! Token scopes: the names a token may use (prefixes of whole name parts) and the highest
//! priority it may acquire at. Pure values and their matching rules; `api::scoped` checks
//! calls against them, and a listing passes [`Prefixes`] down to the store so that a page
//! holds only names in scope.
//!
//! A prefix is one or more whole name parts, with or without a final `/`: `jobs` and `jobs/`
//! both cover the name `jobs` and every name below it (`jobs/x`, `jobs/x/y`), never `jobs2`
//! or `jobs2/x`.

use std::fmt;

use crate::model::LockName;

/// One prefix of whole name parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamePrefix {
    /// The parts, joined by `/`, without a final `/`.
    parts: String,
    /// As it was written, for messages.
    written: String,
}

impl NamePrefix {
    /// A prefix as written in a token file: a lock name, optionally followed by one `/`.
    pub fn parse(raw: &str) -> Result<NamePrefix, String> {
        let parts = raw.strip_suffix('/').unwrap_or(raw);
        if parts.is_empty() {
            return Err(format!(
                "prefix {raw:?} is empty; leave `prefixes` out for a token that may use every name"
            ));
        }
        LockName::parse(parts).map_err(|why| format!("prefix {raw:?}: {why}"))?;
        Ok(NamePrefix {
            parts: parts.to_owned(),
            written: raw.to_owned(),
        })
    }

    /// Whether `name` is this prefix's name or a name below it.
    pub fn covers(&self, name: &str) -> bool {
        match name.strip_prefix(self.parts.as_str()) {
            Some(rest) => rest.is_empty() || rest.starts_with('/'),
            None => false,
        }
    }

    /// Whether some name this prefix covers starts with the plain string `prefix` (the
    /// `prefix` of a listing or of an event stream).
    pub fn reaches(&self, prefix: &str) -> bool {
        self.parts.starts_with(prefix)
            || prefix
                .strip_prefix(self.parts.as_str())
                .is_some_and(|rest| rest.starts_with('/'))
    }

    /// Whether `name` or some name below it is covered: a listing may skip the subtree of a
    /// name for which this is false.
    pub fn may_cover_below(&self, name: &str) -> bool {
        self.covers(name)
            || self
                .parts
                .strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('/'))
    }

    /// The prefix's parts, without a final `/`.
    pub fn as_str(&self) -> &str {
        &self.parts
    }
}

/// The prefixes of a scoped token: a name is in scope when one of them covers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prefixes(Box<[NamePrefix]>);

impl Prefixes {
    /// At least one prefix.
    pub fn new(prefixes: Vec<NamePrefix>) -> Result<Prefixes, String> {
        if prefixes.is_empty() {
            return Err(
                "prefixes is empty; leave it out for a token that may use every name".into(),
            );
        }
        Ok(Prefixes(prefixes.into_boxed_slice()))
    }

    /// One pass over the prefixes.
    pub fn covers(&self, name: &str) -> bool {
        self.0.iter().any(|p| p.covers(name))
    }

    /// Whether any name in scope starts with the plain string `prefix`.
    pub fn reaches(&self, prefix: &str) -> bool {
        self.0.iter().any(|p| p.reaches(prefix))
    }

    pub fn may_cover_below(&self, name: &str) -> bool {
        self.0.iter().any(|p| p.may_cover_below(name))
    }

    /// A narrower plain prefix that still holds every name in scope that starts with
    /// `prefix`, when one prefix alone reaches it; otherwise `prefix` itself.
    pub fn narrow<'a>(&'a self, prefix: &'a str) -> &'a str {
        let mut reaching = self.0.iter().filter(|p| p.reaches(prefix));
        match (reaching.next(), reaching.next()) {
            (Some(only), None) if only.parts.len() > prefix.len() => &only.parts,
            _ => prefix,
        }
    }
}

impl fmt::Display for Prefixes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, prefix) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(&prefix.written)?;
        }
        Ok(())
    }
}

/// What a token may do; the default (no limits) is an unscoped token's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scope {
    /// The names it may use; `None`: every name.
    pub prefixes: Option<std::sync::Arc<Prefixes>>,
    /// The highest priority it may acquire at; `None`: any below the SRE override.
    pub max_priority: Option<u32>,
}

impl Scope {
    pub fn is_unlimited(&self) -> bool {
        self.prefixes.is_none() && self.max_priority.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefixes(raw: &[&str]) -> Prefixes {
        Prefixes::new(raw.iter().map(|r| NamePrefix::parse(r).unwrap()).collect()).unwrap()
    }

    #[test]
    fn a_prefix_covers_whole_parts_only() {
        for written in ["jobs", "jobs/"] {
            let p = NamePrefix::parse(written).unwrap();
            assert!(p.covers("jobs"), "{written}");
            assert!(p.covers("jobs/x"));
            assert!(p.covers("jobs/x/y"));
            assert!(!p.covers("jobs2"));
            assert!(!p.covers("jobs2/x"));
            assert!(!p.covers("job"));
            assert!(!p.covers("other/jobs"));
        }
        let deep = NamePrefix::parse("team/a/").unwrap();
        assert!(deep.covers("team/a/b") && deep.covers("team/a"));
        assert!(!deep.covers("team/ab") && !deep.covers("team"));
    }

    #[test]
    fn bad_prefixes_are_refused() {
        for bad in [
            "", "/", "/jobs", "jobs//", "a//b", "a b", "../x", "jobs/./x",
        ] {
            assert!(NamePrefix::parse(bad).is_err(), "{bad:?}");
        }
        assert!(Prefixes::new(Vec::new()).is_err());
    }

    #[test]
    fn a_listing_prefix_is_reached_when_some_name_in_scope_starts_with_it() {
        let scope = prefixes(&["jobs/", "ci/nightly"]);
        for inside in [
            "",
            "j",
            "jobs",
            "jobs/",
            "jobs/etl",
            "ci",
            "ci/",
            "ci/nightly/x",
        ] {
            assert!(scope.reaches(inside), "{inside:?}");
        }
        for outside in ["jobs2", "jobs2/", "x", "ci/other", "ci/nightly2", "cia"] {
            assert!(!scope.reaches(outside), "{outside:?}");
        }
    }

    #[test]
    fn subtrees_that_hold_nothing_in_scope_can_be_skipped() {
        let scope = prefixes(&["team/a"]);
        assert!(scope.may_cover_below("team"));
        assert!(scope.may_cover_below("team/a"));
        assert!(scope.may_cover_below("team/a/b"));
        assert!(!scope.may_cover_below("team/ab"));
        assert!(!scope.may_cover_below("tea"));
        assert!(!scope.may_cover_below("other"));
    }

    #[test]
    fn one_reaching_prefix_narrows_a_broad_one() {
        let one = prefixes(&["jobs/"]);
        assert_eq!(one.narrow(""), "jobs");
        assert_eq!(one.narrow("jo"), "jobs");
        assert_eq!(one.narrow("jobs/etl"), "jobs/etl");
        let two = prefixes(&["jobs", "ci"]);
        assert_eq!(two.narrow(""), "");
        assert_eq!(two.narrow("c"), "ci");
        assert_eq!(two.to_string(), "jobs, ci");
    }
}
