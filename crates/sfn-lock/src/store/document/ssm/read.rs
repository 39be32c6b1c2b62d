//! The SSM store's read: the newest generation, from the `current` hint on.
//!
//! `current` repeats the newest generation, overwritten by its writer after
//! the create. It is only a hint: a writer may die between create and hint,
//! or write it late. So a read probes the hint's own generation and the nine
//! after it and takes the newest found; a hint whose generation is gone, or
//! none, proves nothing: then the lock's generations are listed.
//!
//! A newest generation that landed late, or that is old, is confirmed by a
//! listing ([`SsmDocuments::settled`]). A hint is written after its
//! generation's create and a generation is deleted only once a newer one
//! exists, so a listing that finds nothing newer than a hint whose
//! generation is gone missed some (SSM documents that a page may hold fewer
//! items than exist): the read is then `LockStoreUnavailable`. The newest
//! generation is never deleted, not even by the reclaim (`store/document/ssm/reclaim.rs`).

use aws_sdk_ssm::error::ProvideErrorMetadata;

use crate::aws::errors::classify;
use crate::aws::service_clock::ServiceDate;
use crate::store::document::ssm::calls::{found, Found};
use crate::store::document::ssm::generations::{KEEP_SUPERSEDED_MILLIS, WRITE_WINDOW_MILLIS};
use crate::store::document::ssm::path::SsmDocuments;
use crate::store::document::ssm::window::{late, no_date, SsmRead};
use crate::vocab::error::StoreError;
use crate::vocab::model::LockName;

impl SsmDocuments {
    pub(crate) async fn read_newest(&self, lock_name: &LockName) -> Result<SsmRead, StoreError> {
        let date = ServiceDate::default();
        let got = self
            .client
            .get_parameter()
            .name(self.current_name(lock_name))
            .customize()
            .interceptor(date.clone())
            .send()
            .await;
        let hint = match got {
            Ok(output) => output.parameter().map(found).transpose()?,
            Err(error) if error.code() == Some("ParameterNotFound") => None,
            Err(error) => return Err(classify("GetParameter", error)),
        };
        let read_at = date.millis().ok_or_else(|| no_date("GetParameter"))?;
        let read = |newest: Option<Found>| match newest {
            Some(Found {
                envelope,
                modified_at,
            }) => SsmRead {
                envelope: Some(envelope),
                modified_at,
                read_at,
            },
            // Never used: no document, with the read's time.
            None => SsmRead {
                envelope: None,
                modified_at: read_at,
                read_at,
            },
        };
        let Some(hint) = hint else {
            return Ok(read(self.list_generations(lock_name).await?));
        };
        let from = hint.envelope.generation;
        if let Some(newest) = self.probe(lock_name, from).await? {
            let newest = self.settled(lock_name, newest, read_at).await?;
            return Ok(read(Some(newest)));
        }
        if let Some(listed) = self.list_generations(lock_name).await? {
            if listed.envelope.generation > from {
                return Ok(read(Some(listed)));
            }
        }
        Err(StoreError::Unavailable(format!(
            "lock {:?}: its hint names generation {from}, which is gone, and listing its \
             parameters found nothing as new (a partial listing, or parameters deleted \
             by hand); nothing is decided on it",
            lock_name.as_str()
        )))
    }

    /// The newest a probe found, or a listing's newer one. A generation that
    /// landed late (its writer stalled: it may stand beside the chain, after
    /// generations deleted meanwhile, and a hint written late may point at
    /// it) or one old enough that its successors may have come and gone
    /// (a probe of ten names is not documented as one snapshot) is trusted
    /// only once a listing finds nothing newer. Forks are always below the
    /// chain's newest: they re-make deleted generations.
    async fn settled(
        &self,
        lock_name: &LockName,
        found: Found,
        read_at: i64,
    ) -> Result<Found, StoreError> {
        let landed_late = found
            .envelope
            .read_at
            .is_some_and(|decided| late(found.modified_at - decided));
        let old = read_at - found.modified_at > KEEP_SUPERSEDED_MILLIS - WRITE_WINDOW_MILLIS;
        if !landed_late && !old {
            return Ok(found);
        }
        Ok(match self.list_generations(lock_name).await? {
            Some(listed) if listed.envelope.generation > found.envelope.generation => listed,
            _ => found,
        })
    }
}
