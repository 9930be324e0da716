//! What a service's names are: locks, or elections.

/// The kind of resource a service keeps: locks, or elections, which are locks with a value
/// and a strict renewal (see `api::elections`). A lock and an election of one name are
/// unrelated: each kind has its own roots in the store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Resource {
    #[default]
    Lock,
    Election,
    Semaphore,
}

impl Resource {
    pub fn as_str(self) -> &'static str {
        match self {
            Resource::Lock => "lock",
            Resource::Election => "election",
            Resource::Semaphore => "semaphore",
        }
    }

    pub fn is_lock(&self) -> bool {
        *self == Resource::Lock
    }
}
