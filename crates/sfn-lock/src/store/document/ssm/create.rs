//! The arbiter: creating a lock's next generation, if absent (DESIGN.md,
//! "SSM store").

use tracing::warn;

use crate::store::document::doc::LockDoc;
use crate::store::document::ssm::calls::fit;
use crate::store::document::ssm::generations::{backlog_full, next_envelope, Base};
use crate::store::document::ssm::path::SsmDocuments;
use crate::store::document::ssm::window::{within_window, SsmRead};
use crate::vocab::error::StoreError;
use crate::vocab::model::LockName;

impl SsmDocuments {
    /// Creates the generation after `read` holding `doc`; `false` if another
    /// writer's came first (or it landed too late to answer for).
    pub(crate) async fn create_next(
        &self,
        lock_name: &LockName,
        read: &SsmRead,
        doc: &LockDoc,
    ) -> Result<bool, StoreError> {
        let base = read.envelope.as_ref().map(|envelope| Base {
            envelope,
            modified_at: read.modified_at,
            read_at: read.read_at,
        });
        let (mut next, deletable) = next_envelope(base, doc.clone(), true);
        // Deleted before the create: they may go whoever wins it, and a create
        // that lands unseen (its answer lost) leaves none behind undeleted.
        let deletes_failed =
            !deletable.is_empty() && !self.delete_generations(lock_name, deletable).await;
        if deletes_failed {
            next = next_envelope(base, doc.clone(), false).0;
        }
        // A grant brings a holder the read did not have (the count may stay,
        // when it replaces an expired one).
        let before = read
            .envelope
            .as_ref()
            .map(|read| read.lock.holders.as_slice())
            .unwrap_or_default();
        let grant = doc.holders.iter().any(|holder| {
            !before
                .iter()
                .any(|b| b.owner == holder.owner && b.fencing_token == holder.fencing_token)
        });
        let frees = doc.holders.len() < before.len();
        // A busy lock keeps many generations for five minutes; only one
        // whose old generations cannot be deleted is stopped from growing:
        // nothing but a release (which frees a holder) is written then, so
        // its generations stay bounded by the bound plus its holders.
        if !frees && deletes_failed && backlog_full(&next) {
            return Err(StoreError::Misconfigured(format!(
                "lock {:?} keeps {} old generations: the SSM store cannot delete them \
                 (is ssm:DeleteParameters denied? see the log); it takes no grant, renewal \
                 or confirmation until they go, and releases still work",
                lock_name.as_str(),
                next.generation - next.tail
            )));
        }
        next.read_at = Some(read.read_at);
        let value = fit(&mut next, grant)?;
        let name = self.generation_name(lock_name, next.generation);
        let Some(landed_at) = self.put(name, value.clone(), false).await? else {
            return Ok(false);
        };
        // Too late to answer for: decided again from a fresh read, which
        // finds this change (a slow but true create) or the chain without it.
        if !within_window(lock_name, read, landed_at, next.generation)? {
            return Ok(false);
        }
        // The change is made; a lagging hint costs the next reader a probe.
        if let Err(error) = self.put(self.current_name(lock_name), value, true).await {
            warn!(lock_name = lock_name.as_str(), error = %error, "could not update the current-generation hint");
        }
        Ok(true)
    }
}
