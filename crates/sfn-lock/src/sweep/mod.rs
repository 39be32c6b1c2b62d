//! Freeing the locks of executions that ended without releasing them: which
//! machines and when (`policy`), the sweep on an execution's end event
//! (`cleanup`), the reconciler when no event came (`reconcile`, `reclaim`).

pub mod attach;
pub mod cleanup;
mod events;
pub(crate) mod judge;
pub mod policy;
pub(crate) mod reclaim;
pub mod reconcile;
mod wake_queues;
