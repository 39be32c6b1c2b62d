//! Values every store writes the same way: a new lock's first fencing token,
//! and the id a release call leaves behind to recognise its own retry.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::vocab::model::EpochMillis;

/// A brand-new item's first token: the grant time in microseconds (`store::dynamodb` GRANT).
pub(crate) fn token_base(now: EpochMillis) -> i64 {
    now.0.saturating_mul(1000)
}

/// A value no other release call writes: the clock, a per-process count, and
/// the standard library's per-process random hash keys.
pub(crate) fn release_id() -> String {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    let mut random = RandomState::new().build_hasher();
    random.write_u128(nanos);
    random.write_u64(call);
    format!("{nanos:x}-{call:x}-{:016x}", random.finish())
}
