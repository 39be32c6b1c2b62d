//! The lock item's values, as `store/dynamodb/grant.rs` writes them and reads them back.
//! A missing or malformed attribute is `LockStoreMisconfigured`: the table is
//! shared with something else, or written by hand.

use aws_sdk_dynamodb::types::AttributeValue;

use crate::store::dynamodb::table::{
    Item, ACQUIRED_AT, EXPIRES_AT, FENCING_TOKEN, OWNER, RELEASED_BY, RELEASED_TOKEN,
    TTL_GRACE_SECONDS,
};
use crate::vocab::error::StoreError;
use crate::vocab::model::{EpochMillis, Holder, Lease, LockName, Owner};

pub(crate) fn gc_after(instant: EpochMillis) -> i64 {
    instant
        .plus_seconds(TTL_GRACE_SECONDS)
        .as_epoch_seconds_ceil()
}

pub(crate) fn string(text: &str) -> AttributeValue {
    AttributeValue::S(text.to_owned())
}

pub(crate) fn number(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

pub(crate) fn malformed(attribute: &str) -> StoreError {
    StoreError::Misconfigured(format!(
        "lock item has a missing or malformed `{attribute}` attribute; is the table shared with something else?"
    ))
}

pub(crate) fn read_number<T: std::str::FromStr>(
    item: &Item,
    attribute: &str,
) -> Result<T, StoreError> {
    item.get(attribute)
        .and_then(|value| value.as_n().ok())
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| malformed(attribute))
}

pub(crate) fn read_string(item: &Item, attribute: &str) -> Result<String, StoreError> {
    item.get(attribute)
        .and_then(|value| value.as_s().ok())
        .cloned()
        .ok_or_else(|| malformed(attribute))
}

pub(crate) fn holder_from(item: Option<&Item>) -> Result<Holder, StoreError> {
    let item = item.ok_or_else(|| malformed(OWNER))?;
    // Items written before releases were recorded have neither attribute.
    let last_release = match (
        item.contains_key(RELEASED_BY),
        item.contains_key(RELEASED_TOKEN),
    ) {
        (false, false) => None,
        _ => Some((
            read_string(item, RELEASED_BY)?,
            read_number(item, RELEASED_TOKEN)?,
        )),
    };
    Ok(Holder {
        owner: read_string(item, OWNER)?,
        fencing_token: read_number(item, FENCING_TOKEN)?,
        expires_at: EpochMillis(read_number(item, EXPIRES_AT)?),
        last_release,
    })
}

pub(crate) fn lease_from(
    lock_name: &LockName,
    owner: &Owner,
    item: &Item,
) -> Result<Lease, StoreError> {
    Ok(Lease {
        lock_name: lock_name.clone(),
        owner: owner.clone(),
        fencing_token: read_number(item, FENCING_TOKEN)?,
        acquired_at: EpochMillis(read_number(item, ACQUIRED_AT)?),
        expires_at: EpochMillis(read_number(item, EXPIRES_AT)?),
    })
}
