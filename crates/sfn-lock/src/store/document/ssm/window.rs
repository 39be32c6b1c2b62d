//! The SSM store's write window: what a write rests on (its read, with
//! SSM's times), and the rule that a create landing too long after that read
//! is not answered for (DESIGN.md, "SSM store", "The write window").

use tracing::warn;

use crate::aws::service_clock::DATE_RESOLUTION_MILLIS;
use crate::store::document::ssm::generations::{Envelope, WRITE_WINDOW_MILLIS};
use crate::vocab::error::StoreError;
use crate::vocab::model::LockName;

/// What a write rests on: the newest generation read (`None`: the lock has
/// none), its `LastModifiedDate`, and the `Date` of the read's first answer.
#[derive(Clone, Debug)]
pub struct SsmRead {
    pub(crate) envelope: Option<Envelope>,
    pub(crate) modified_at: i64,
    pub(crate) read_at: i64,
}

pub(crate) fn no_date(call: &str) -> StoreError {
    StoreError::Misconfigured(format!(
        "SSM's answer to {call} had no Date header (AWS always sends one; is a proxy \
         removing it?): the store judges time by it alone"
    ))
}

/// A create that landed later than [`WRITE_WINDOW_MILLIS`] after its read (by
/// the service's clock: the caller stalled, or its request did) may have
/// re-made a generation deleted meanwhile, beside the chain that went on:
/// its change is not answered for (`false`: the caller decides again from a
/// fresh read, which finds the chain with this change or without it; a read
/// never takes a late generation as the newest without a listing,
/// `store/document/ssm/read.rs`). No `Date` is `LockStoreMisconfigured`.
pub(crate) fn within_window(
    lock_name: &LockName,
    read: &SsmRead,
    landed_at: Option<i64>,
    generation: u64,
) -> Result<bool, StoreError> {
    let landed_at = landed_at.ok_or_else(|| no_date("PutParameter"))?;
    let took = landed_at - read.read_at;
    if !late(took) {
        return Ok(true);
    }
    warn!(
        lock_name = lock_name.as_str(),
        generation,
        took_millis = took,
        "a change landed too long after its read to be answered for; deciding again"
    );
    Ok(false)
}

/// Whether a create that landed `took` after its read (SSM's `Date`s,
/// whole seconds) is beyond the write window.
pub(crate) fn late(took: i64) -> bool {
    took + DATE_RESOLUTION_MILLIS > WRITE_WINDOW_MILLIS
}
