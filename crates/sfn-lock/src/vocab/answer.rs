//! What `acquire-lock` and `release-lock` answer: the JSON a state machine
//! reads (`$.lock`), and the output a woken waiter's task receives. These
//! field names are a public API.

use serde::Serialize;

use crate::vocab::model::{Lease, Outcome};
use crate::vocab::request::{LeaseSeconds, Limit};

/// `acquire-lock`'s answer. `release-lock` accepts it back as its event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AcquireResponse {
    pub lock_name: String,
    pub owner: String,
    pub fencing_token: u64,
    pub acquired_at: String,
    pub expires_at: String,
    pub lease_seconds: u32,
    /// `granted` for a new grant, `renewed` when the caller already held it.
    pub outcome: Outcome,
    /// The holders the lock admits at once, as asked; left out for 1 (a
    /// mutex), so a mutex's answer is what it always was.
    #[serde(skip_serializing_if = "is_one")]
    pub limit: u32,
}

/// `acquire-lock`'s answer to a caller that queued (`taskToken`): its place.
/// Its task goes on waiting; the grant arrives through the token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueuedResponse {
    pub lock_name: String,
    pub owner: String,
    /// Always `queued`.
    pub outcome: Outcome,
    /// 1 is next.
    pub position: u32,
}

/// Whatever `acquire-lock` answers: a grant, or a place in the queue.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum AcquireAnswer {
    Lease(AcquireResponse),
    Queued(QueuedResponse),
}

impl AcquireResponse {
    /// The answer for `lease`, also the output a woken waiter's task gets.
    pub fn new(lease: &Lease, lease_seconds: LeaseSeconds, limit: Limit, outcome: Outcome) -> Self {
        AcquireResponse {
            lock_name: lease.lock_name.to_string(),
            owner: lease.owner.to_string(),
            fencing_token: lease.fencing_token,
            acquired_at: lease.acquired_at.to_rfc3339(),
            expires_at: lease.expires_at.to_rfc3339(),
            lease_seconds: lease_seconds.get(),
            outcome,
            limit: limit.get(),
        }
    }
}

/// `release-lock`'s answer. `not_held` and `held_by_other` are normal results:
/// a cleanup path must never fail because the lock was already gone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseResponse {
    pub lock_name: String,
    pub owner: String,
    pub released: bool,
    pub outcome: Outcome,
}

fn is_one(limit: &u32) -> bool {
    *limit == 1
}
