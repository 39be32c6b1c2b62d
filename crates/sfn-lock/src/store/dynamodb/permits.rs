//! A semaphore's permits on the lock's own item, beside the mutex attributes.
//!
//! A grant with `limit` ≥ 2 adds two attributes named after a hash of its
//! owner: `permit:<h>` = `{owner, acquiredAt, expiresAt}` and `token:<h>` =
//! its fencing token (a separate attribute because one update expression cannot
//! both create a map and set a member of it). `holderCount` counts the permits
//! present, live or expired, so that one condition can admit a grant. The hash
//! keeps the attribute names short: the item must hold a thousand permits
//! within DynamoDB's 400 KB (see [`check_fits`]).
//!
//! The two formats never both hold a live grant: a permit grant removes an
//! expired mutex holder, and a mutex grant needs `holderCount` 0. So a
//! mutex-format `owner` and live permits never overlap, and neither do the
//! TTLs they write.

use sha2::{Digest, Sha256};

use crate::store::dynamodb::item::{holder_from, malformed, read_number, read_string};
use crate::store::dynamodb::table::{Item, ACQUIRED_AT, EXPIRES_AT, LOCK_NAME, OWNER};
use crate::vocab::error::StoreError;
use crate::vocab::model::MAX_LOCK_NAME_BYTES;
use crate::vocab::model::{Contention, EpochMillis, Holder, Lease, LockName, Owner};
use crate::vocab::request::{Limit, MAX_LIMIT};

/// How many permits are present, live or expired: the admission counter.
pub const HOLDER_COUNT: &str = "holderCount";
pub const PERMIT_PREFIX: &str = "permit:";
pub const TOKEN_PREFIX: &str = "token:";
/// A permit marker's attribute naming the lock it belongs to.
pub const PERMIT_OF: &str = "permitOf";
/// Starts the key of a permit marker. Lock names cannot contain control
/// characters, so no lock item can share a marker's key.
pub const MARKER_PREFIX: &str = "\u{1}permit\u{1}";
/// Expired permits removed by one write: enough to make room, while the
/// condition (one clause per permit) stays far below DynamoDB's 4 KB.
pub const PRUNE_BATCH: usize = 16;
/// The longest owner a semaphore grant accepts. Execution ARNs are at most
/// about 230 bytes; the bound makes the item's worst case computable.
pub const MAX_PERMIT_OWNER_BYTES: usize = 256;
/// DynamoDB's item size limit.
pub const MAX_ITEM_BYTES: usize = 400 * 1024;
/// One permit's bytes besides its owner, by DynamoDB's sizing rules (names
/// and strings in UTF-8; a number 1 byte per two significant digits plus 1: an
/// epoch millisecond 8, a token at most 11; a map 3 bytes plus 1 per member):
/// `permit:<32 hex>` 39 + map 3 + `owner` 6 + `acquiredAt` 19 + `expiresAt`
/// 18 + `token:<32 hex>` 38 + its number 11 = 134, rounded up.
pub const PERMIT_OVERHEAD_BYTES: usize = 144;
/// The item's other attributes at their largest, besides the lock name:
/// `releasedBy` may name a 2048-byte mutex owner; the counters, the TTL and
/// `releaseId` take the rest.
pub const ITEM_BASE_BYTES: usize = 2048 + 512;

/// The largest item a semaphore can make: [`MAX_LIMIT`] permits with owners as
/// long as allowed, a lock name as long as allowed.
pub const fn worst_item_bytes(lock_name_bytes: usize, limit: u32) -> usize {
    let per_permit = PERMIT_OVERHEAD_BYTES + MAX_PERMIT_OWNER_BYTES;
    LOCK_NAME.len() + lock_name_bytes + ITEM_BASE_BYTES + per_permit * limit as usize
}

// Every limit the contract accepts fits with every lock name it accepts, so
// the only request a semaphore refuses for size is one with a longer owner.
// One permit more than the limit fits too: a refused grant's would-be item,
// should DynamoDB check its size before the condition (it does not say).
const _: () = assert!(worst_item_bytes(MAX_LOCK_NAME_BYTES, MAX_LIMIT + 1) <= MAX_ITEM_BYTES);

/// A semaphore owner must be short enough for the worst-case item to fit.
pub fn check_fits(owner: &Owner) -> Result<(), StoreError> {
    match owner.as_str().len() {
        bytes if bytes > MAX_PERMIT_OWNER_BYTES => Err(StoreError::Refused {
            field: "owner".into(),
            rule: format!(
                "must be at most {MAX_PERMIT_OWNER_BYTES} bytes when limit is above 1 (got \
                 {bytes}): a thousand permits must fit in one {MAX_ITEM_BYTES}-byte DynamoDB item"
            ),
        }),
        _ => Ok(()),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// `owner`'s two attribute names: 128 bits of SHA-256, collision-free in practice.
pub fn permit_names(owner: &str) -> (String, String) {
    let id = hex(&Sha256::digest(owner.as_bytes())[..16]);
    (
        format!("{PERMIT_PREFIX}{id}"),
        format!("{TOKEN_PREFIX}{id}"),
    )
}

/// The key of the marker that lets the sweep find `owner`'s permit of
/// `lock_name` through the owner index (permits carry no `owner` attribute).
pub fn marker_key(lock_name: &LockName, owner: &Owner) -> String {
    let mut digest = Sha256::new();
    digest.update(lock_name.as_str().as_bytes());
    digest.update([0]);
    digest.update(owner.as_str().as_bytes());
    format!("{MARKER_PREFIX}{}", hex(&digest.finalize()))
}

/// One permit as the item holds it.
#[derive(Clone, Debug)]
pub(crate) struct Permit {
    /// The attribute names: `permit:<h>` and `token:<h>`.
    pub names: (String, String),
    pub holder: Holder,
    pub acquired_at: EpochMillis,
}

fn permit_from(item: &Item, permit_name: &str) -> Result<Permit, StoreError> {
    let id = &permit_name[PERMIT_PREFIX.len()..];
    let token_name = format!("{TOKEN_PREFIX}{id}");
    let fields = item
        .get(permit_name)
        .and_then(|value| value.as_m().ok())
        .ok_or_else(|| malformed(permit_name))?;
    let fencing_token = read_number(item, &token_name)?;
    let holder = Holder {
        owner: read_string(fields, OWNER)?,
        fencing_token,
        expires_at: EpochMillis(read_number(fields, EXPIRES_AT)?),
        last_release: None,
    };
    Ok(Permit {
        acquired_at: EpochMillis(read_number(fields, ACQUIRED_AT)?),
        names: (permit_name.to_owned(), token_name),
        holder,
    })
}

/// Every permit on the item; `holderCount` must agree, or the item was
/// written by something else and no decision on it can be trusted.
pub(crate) fn permits_of(item: &Item) -> Result<Vec<Permit>, StoreError> {
    let mut permits = item
        .keys()
        .filter(|name| name.starts_with(PERMIT_PREFIX))
        .map(|name| permit_from(item, name))
        .collect::<Result<Vec<_>, _>>()?;
    // The item is a hash map: a fixed order makes every decision on it (which
    // expired permit a grant replaces) the same from the same item, so the
    // explorer's seeds replay exactly.
    permits.sort_by(|a, b| a.names.cmp(&b.names));
    let count: usize = match item.get(HOLDER_COUNT) {
        None => 0,
        Some(_) => read_number(item, HOLDER_COUNT)?,
    };
    if count != permits.len() {
        return Err(StoreError::Misconfigured(format!(
            "lock item counts {count} holders but has {} permits; was it written by hand?",
            permits.len()
        )));
    }
    Ok(permits)
}

/// `owner`'s permit on the item, if any.
pub(crate) fn permit_of(item: &Item, owner: &Owner) -> Result<Option<Permit>, StoreError> {
    let (permit_name, _) = permit_names(owner.as_str());
    match item.contains_key(&permit_name) {
        true => permit_from(item, &permit_name).map(Some),
        false => Ok(None),
    }
}

pub(crate) fn permit_lease(
    lock_name: &LockName,
    owner: &Owner,
    item: &Item,
) -> Result<Lease, StoreError> {
    let permit = permit_of(item, owner)?.ok_or_else(|| malformed(PERMIT_PREFIX))?;
    Ok(Lease {
        lock_name: lock_name.clone(),
        owner: owner.clone(),
        fencing_token: permit.holder.fencing_token,
        acquired_at: permit.acquired_at,
        expires_at: permit.holder.expires_at,
    })
}

/// Every live holder on the item, mutex or permit, the first to end first.
pub(crate) fn live_holders(item: &Item, now: EpochMillis) -> Result<Vec<Holder>, StoreError> {
    let mut holders = match item.contains_key(OWNER) {
        true => vec![holder_from(Some(item))?],
        false => Vec::new(),
    };
    holders.extend(permits_of(item)?.into_iter().map(|permit| permit.holder));
    holders.retain(|holder| holder.expires_at >= now);
    holders.sort_by_key(|holder| holder.expires_at);
    Ok(holders)
}

/// What an acquire does after its first write found the item in the way.
#[derive(Debug)]
pub(crate) enum Decision {
    /// The caller holds the live mutex-format lease (until `expires_at`):
    /// renew it.
    RenewMutex {
        fencing_token: u64,
        expires_at: EpochMillis,
    },
    /// The caller holds a live permit: renew it (keeping its grant time).
    RenewPermit {
        fencing_token: u64,
        acquired_at: EpochMillis,
        expires_at: EpochMillis,
    },
    /// Live holders fill the caller's limit.
    Held(Contention),
    /// Remove these expired permits (the caller's own, then the longest
    /// expired) in one write
    /// guarded by `seen_count`, and grant the caller in it when that makes room.
    Prune {
        seen_count: usize,
        expired: Vec<Permit>,
        grant: bool,
    },
    /// Nothing on the item explains the failed condition: it changed since.
    Again,
}

/// Decides from the item the failed condition returned. Expiry is `now`'s,
/// as in the conditions; the writes that follow re-check all of it.
pub(crate) fn decide(
    item: Option<&Item>,
    owner: &Owner,
    limit: Limit,
    now: EpochMillis,
) -> Result<Decision, StoreError> {
    let Some(item) = item else {
        return Ok(Decision::Again);
    };
    if item.contains_key(OWNER) {
        let holder = holder_from(Some(item))?;
        if holder.expires_at >= now {
            return Ok(match holder.owner == owner.as_str() {
                true => Decision::RenewMutex {
                    fencing_token: holder.fencing_token,
                    expires_at: holder.expires_at,
                },
                false => Decision::Held(Contention {
                    limit,
                    holders: vec![holder],
                }),
            });
        }
    }
    let permits = permits_of(item)?;
    let (mut live, mut expired): (Vec<Permit>, Vec<Permit>) = permits
        .into_iter()
        .partition(|permit| permit.holder.expires_at >= now);
    if let Some(mine) = live
        .iter()
        .find(|permit| permit.holder.owner == owner.as_str())
    {
        return Ok(Decision::RenewPermit {
            fencing_token: mine.holder.fencing_token,
            acquired_at: mine.acquired_at,
            expires_at: mine.holder.expires_at,
        });
    }
    if live.len() >= limit.get() as usize {
        live.sort_by_key(|permit| permit.holder.expires_at);
        return Ok(Decision::Held(Contention {
            limit,
            holders: live.into_iter().map(|permit| permit.holder).collect(),
        }));
    }
    if expired.is_empty() {
        return Ok(Decision::Again);
    }
    let seen_count = live.len() + expired.len();
    // The caller's own expired permit first: the grant replaces it, and a
    // grant that left it in place would fail on it (`attribute_not_exists`).
    expired.sort_by_key(|permit| {
        (
            permit.holder.owner != owner.as_str(),
            permit.holder.expires_at,
        )
    });
    expired.truncate(PRUNE_BATCH);
    // After the write: seen - pruned + 1 holders, at most the caller's limit.
    let grant = seen_count - expired.len() < limit.get() as usize;
    Ok(Decision::Prune {
        seen_count,
        expired,
        grant,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_item_is_the_documented_sum() {
        // DESIGN.md, "Semaphore": 8 + 1024 + 2560 + 1000 x (144 + 256).
        assert_eq!(worst_item_bytes(1024, 1000), 403_592);
        assert_eq!(worst_item_bytes(0, 1), 8 + 2560 + 400);
        assert!(worst_item_bytes(MAX_LOCK_NAME_BYTES, MAX_LIMIT + 1) <= MAX_ITEM_BYTES);
    }
}
