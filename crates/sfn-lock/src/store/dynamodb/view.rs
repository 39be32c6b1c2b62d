//! Operators' reads on DynamoDB (`sfn-lock status`, `list`): one strongly
//! consistent `GetItem` for a lock; a `Scan` for the list. Nothing is written.
//! A Scan reads every item of the table (markers and waiters included), so a
//! list costs the table's size in read units, whatever it finds: it stops
//! at its bound, and the CLI says when it did.

use crate::aws::errors::classify;
use crate::store::dynamodb::item::{
    holder_from, malformed, number, read_number, read_string, string,
};
use crate::store::dynamodb::permits::{permits_of, HOLDER_COUNT};
use crate::store::dynamodb::queue::queue_length;
use crate::store::dynamodb::table::{
    DynamoStore, Item, ACQUIRED_AT, FENCING_TOKEN, LOCK_NAME, OWNER,
};
use crate::vocab::error::StoreError;
use crate::vocab::model::{EpochMillis, LockName};
use crate::vocab::view::{Grant, LockList, LockView};

/// Items one Scan page evaluates (before the filter).
const SCAN_PAGE: i32 = 100;

/// The lock as its item records it; a missing item is a lock never taken
/// (or collected by TTL a day after its last use).
pub(crate) fn view_of(lock_name: LockName, item: Option<&Item>) -> Result<LockView, StoreError> {
    let Some(item) = item else {
        return Ok(LockView::new(lock_name, Vec::new()));
    };
    let mut grants = Vec::new();
    if item.contains_key(OWNER) {
        let holder = holder_from(Some(item))?;
        grants.push(Grant {
            owner: holder.owner,
            fencing_token: holder.fencing_token,
            acquired_at: EpochMillis(read_number(item, ACQUIRED_AT)?),
            expires_at: holder.expires_at,
        });
    }
    grants.extend(permits_of(item)?.into_iter().map(|permit| Grant {
        owner: permit.holder.owner,
        fencing_token: permit.holder.fencing_token,
        acquired_at: permit.acquired_at,
        expires_at: permit.holder.expires_at,
    }));
    let mut view = LockView::new(lock_name, grants);
    view.fencing_token = match item.contains_key(FENCING_TOKEN) {
        true => Some(read_number(item, FENCING_TOKEN)?),
        false => None,
    };
    view.queue_length = Some(queue_length(item)?);
    Ok(view)
}

impl DynamoStore {
    pub(crate) async fn inspect_item(&self, lock_name: &LockName) -> Result<LockView, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table_name)
            .key(LOCK_NAME, string(lock_name.as_str()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|error| classify("GetItem", error))?;
        view_of(lock_name.clone(), output.item.as_ref())
    }

    /// Lock items with a mutex holder or a permit; markers and waiter items
    /// (keys beginning with U+0001, which no lock name may) are left out.
    pub(crate) async fn scan_held(&self, max: usize) -> Result<LockList, StoreError> {
        let mut list = LockList::default();
        let mut start_key = None;
        loop {
            let page = self
                .client
                .scan()
                .table_name(&self.table_name)
                .filter_expression(
                    "(attribute_exists(#owner) OR #holderCount > :zero) \
                     AND NOT begins_with(#lockName, :control)",
                )
                .expression_attribute_names("#owner", OWNER)
                .expression_attribute_names("#holderCount", HOLDER_COUNT)
                .expression_attribute_names("#lockName", LOCK_NAME)
                .expression_attribute_values(":zero", number(0))
                .expression_attribute_values(":control", string("\u{1}"))
                .limit(SCAN_PAGE)
                .set_exclusive_start_key(start_key)
                .send()
                .await
                .map_err(|error| classify("Scan", error))?;
            for item in page.items() {
                if list.locks.len() == max {
                    list.truncated = true;
                    return Ok(list);
                }
                let name = read_string(item, LOCK_NAME)?;
                let name = LockName::new(name).map_err(|_| malformed(LOCK_NAME))?;
                list.locks.push(view_of(name, Some(item))?);
            }
            match page.last_evaluated_key {
                Some(key) => start_key = Some(key),
                None => return Ok(list),
            }
        }
    }

    /// Up to `max` lock names whose item `wanted` picks: a whole-table Scan
    /// (what it reads is billed either way, so the pick is made here; a
    /// filter could not name the `wake:<id>` markers, whose names vary).
    pub(crate) async fn scan_queues(
        &self,
        max: usize,
        wanted: impl Fn(&Item) -> bool,
    ) -> Result<Vec<LockName>, StoreError> {
        let mut names = Vec::new();
        let mut start_key = None;
        loop {
            let page = self
                .client
                .scan()
                .table_name(&self.table_name)
                .limit(SCAN_PAGE)
                .set_exclusive_start_key(start_key)
                .send()
                .await
                .map_err(|error| classify("Scan", error))?;
            for item in page.items().iter().filter(|item| wanted(item)) {
                let name = read_string(item, LOCK_NAME)?;
                if name.starts_with('\u{1}') {
                    continue;
                }
                if names.len() == max {
                    return Ok(names);
                }
                names.push(LockName::new(name).map_err(|_| malformed(LOCK_NAME))?);
            }
            match page.last_evaluated_key {
                Some(key) => start_key = Some(key),
                None => return Ok(names),
            }
        }
    }
}
