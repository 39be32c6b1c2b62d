//! The lock stores, each in its folder behind the contract
//! (`ports::store::LockStore`), naming no other store: `dynamodb/` (one item
//! per lock), `document/` (one JSON document per lock: `s3`, `ssm/`). `any`
//! is the one `LOCK_STORE_URL` names; `names` and `url` are shared.

pub mod any;
pub mod document;
pub mod dynamodb;
pub(crate) mod ids;
pub mod names;
pub mod url;
