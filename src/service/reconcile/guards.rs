//! The guards that leave a job to the reconciler when a call ends before it knows what its
//! writes did.

use std::sync::Arc;

use crate::model::{LeaseId, LockName};
use crate::service::LockService;
use crate::waiter::Waiter;

/// The inline acquire's guard: dropped while `armed` after the call sent a grant, it leaves
/// an [`Repair::UndoGrant`] job, so no lease is left held by nobody (I11).
pub(crate) struct UndoGrant {
    pub(crate) service: Arc<LockService>,
    pub(crate) name: LockName,
    pub(crate) lease: LeaseId,
    pub(crate) lease_ms: u64,
    pub(crate) armed: bool,
    /// Whether the call has sent a write granting `lease`.
    pub(crate) sent_grant: bool,
}

impl Drop for UndoGrant {
    fn drop(&mut self) {
        if self.armed && self.sent_grant {
            let service = self.service.clone();
            let skew_ms = service.max_clock_skew_ms;
            service.reconciler.undo_grant(
                service.clone(),
                &self.name,
                self.lease,
                self.lease_ms,
                skew_ms,
            );
        }
    }
}

/// A release's guard: the waiters its hand-offs went to, and whether one of those writes is
/// unsettled. Dropped while `armed` with one of them waiting here, it leaves a
/// [`Repair::TellHanded`] job (I10). Whether a waiter waits here is asked as the guard goes,
/// since one whose join was still being answered when the release decided may have
/// registered since.
pub(crate) struct UnsettledHandOff<'a> {
    service: &'a LockService,
    name: &'a LockName,
    pub(crate) tried: Vec<Waiter>,
    pub(crate) armed: bool,
}

impl<'a> UnsettledHandOff<'a> {
    pub(crate) fn new(service: &'a LockService, name: &'a LockName) -> Self {
        UnsettledHandOff {
            service,
            name,
            tried: Vec::new(),
            armed: false,
        }
    }

    pub(crate) fn tried(&mut self, to: &Waiter) {
        if !self.tried.iter().any(|w| w.id == to.id) {
            self.tried.push(to.clone());
        }
    }
}

impl Drop for UnsettledHandOff<'_> {
    fn drop(&mut self) {
        let here = |w: &Waiter| self.service.local.ticket(self.name, &w.id).is_some();
        if self.armed && self.tried.iter().any(here) {
            let tried = std::mem::take(&mut self.tried);
            self.service.reconciler.tell_handed(self.name, tried);
        }
    }
}
