//! Where a lock lives in Parameter Store: `/PATH/<encoded name>/<generation>`,
//! its `current` hint, the owners' markers, and the limits SSM puts on names.

use aws_sdk_ssm::Client;

use crate::store::document::store::DocumentStore;
use crate::store::names::{encode_name, owner_hash, OWNER_HASH_DIGITS};
use crate::vocab::error::StoreError;
use crate::vocab::model::{LockName, Owner};

/// SSM's limit on a name is 1011 characters including the ARN prefix
/// (`arn:aws:ssm:REGION:ACCOUNT:parameter`); 64 covers that prefix in every
/// partition and Region, so names are kept to the rest.
pub const MAX_NAME_CHARS: usize = 1011 - 64;
/// SSM allows at most 15 levels in a name.
pub const MAX_LEVELS: usize = 15;
/// A standard parameter's value holds 4 KB (advanced ones cost money).
pub const MAX_VALUE_BYTES: usize = 4096;
/// Generations are numbered with this many digits, so they sort as text too.
const GENERATION_DIGITS: usize = 20;

/// The lock on SSM.
pub type SsmStore = DocumentStore<SsmDocuments>;

#[derive(Clone, Debug)]
pub struct SsmDocuments {
    pub(crate) client: Client,
    /// Begins with `/`, never ends with one.
    pub(crate) path: String,
}

impl SsmStore {
    pub fn ssm(client: Client, path: impl Into<String>) -> Self {
        DocumentStore::new(SsmDocuments {
            client,
            path: path.into(),
        })
    }
}

impl SsmDocuments {
    pub(crate) fn lock_path(&self, lock_name: &LockName) -> String {
        format!("{}/{}", self.path, encode_name(lock_name.as_str()))
    }

    pub(crate) fn generation_name(&self, lock_name: &LockName, generation: u64) -> String {
        format!(
            "{}/{generation:0width$}",
            self.lock_path(lock_name),
            width = GENERATION_DIGITS
        )
    }

    pub(crate) fn current_name(&self, lock_name: &LockName) -> String {
        format!("{}/current", self.lock_path(lock_name))
    }

    pub(crate) fn owner_path(&self, owner: &Owner) -> String {
        format!("{}/.owners/{}", self.path, owner_hash(owner.as_str()))
    }

    /// Refuses a lock name whose marker folder, plus `extra` characters and
    /// at `levels` below the path, SSM could not name.
    pub(crate) fn check_depth(
        &self,
        lock_name: &LockName,
        extra: usize,
        levels: usize,
    ) -> Result<(), StoreError> {
        let chars = self.path.len()
            + "/.owners/".len()
            + OWNER_HASH_DIGITS
            + 1
            + encode_name(lock_name.as_str()).len()
            + extra;
        let levels = self.path.matches('/').count() + levels;
        let rule = if chars > MAX_NAME_CHARS {
            format!(
                "is too long for this SSM store: encoded under the path it needs a \
                 {chars}-character parameter name, and this store allows {MAX_NAME_CHARS}"
            )
        } else if levels > MAX_LEVELS {
            format!("cannot be stored under this SSM path: its names would have {levels} levels, SSM allows {MAX_LEVELS}")
        } else {
            return Ok(());
        };
        Err(StoreError::Refused {
            field: "lockName".into(),
            rule,
        })
    }
}
