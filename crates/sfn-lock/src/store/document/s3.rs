//! The lock on S3 conditional writes (`LOCK_STORE_URL=s3://BUCKET/PREFIX`):
//! one object per lock, `PREFIX<encoded name>` (PREFIX empty or ending in `/`),
//! holding the lock's document;
//! created with `If-None-Match: *`, replaced with `If-Match: <ETag>`. Owner
//! markers, `PREFIX.owners/<owner hash>/<encoded name>`, let the sweep list an
//! ended execution's locks with one request. DESIGN.md ("S3 store").

use aws_sdk_s3::error::ProvideErrorMetadata;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::Client;

use crate::aws::errors::classify;
use crate::store::document::doc::LockDoc;
use crate::store::document::documents::Documents;
use crate::store::document::store::DocumentStore;
use crate::store::names::{decode_name, encode_name, owner_hash, OWNER_HASH_DIGITS};
use crate::store::url::s3_folder;
use crate::vocab::error::StoreError;
use crate::vocab::model::{EpochMillis, LockName, Owner};

/// S3's longest key, in bytes.
pub const MAX_KEY_BYTES: usize = 1024;

/// The lock on S3.
pub type S3Store = DocumentStore<S3Documents>;

#[derive(Clone, Debug)]
pub struct S3Documents {
    client: Client,
    bucket: String,
    prefix: String,
}

impl S3Store {
    /// The store under `prefix`, taken as a folder: `team` means `team/`
    /// ([`s3_folder`]), so that no prefix shares keys with another.
    pub fn s3(client: Client, bucket: impl Into<String>, prefix: impl Into<String>) -> Self {
        DocumentStore::new(S3Documents {
            client,
            bucket: bucket.into(),
            prefix: s3_folder(&prefix.into()),
        })
    }
}

impl S3Documents {
    fn key(&self, lock_name: &LockName) -> String {
        format!("{}{}", self.prefix, encode_name(lock_name.as_str()))
    }

    fn owner_folder(&self, owner: &Owner) -> String {
        format!("{}.owners/{}/", self.prefix, owner_hash(owner.as_str()))
    }

    /// `ListObjectsV2` under `folder`, page by page: each key that is an
    /// encoded lock name below it goes to `each` until it answers `false`.
    /// Anything else in the folder is not a lock of ours, and is passed over.
    async fn each_lock_name(
        &self,
        folder: &str,
        delimiter: Option<&str>,
        mut each: impl FnMut(LockName) -> bool + Send,
    ) -> Result<(), StoreError> {
        let mut continuation = None;
        loop {
            let page = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(folder)
                .set_delimiter(delimiter.map(str::to_owned))
                .set_continuation_token(continuation)
                .send()
                .await
                .map_err(|error| classify("ListObjectsV2", error))?;
            for object in page.contents() {
                let name = object
                    .key()
                    .and_then(|key| key.strip_prefix(folder))
                    .and_then(decode_name)
                    .and_then(|name| LockName::new(name).ok());
                if name.is_some_and(|name| !each(name)) {
                    return Ok(());
                }
            }
            match page.next_continuation_token {
                Some(token) if page.is_truncated == Some(true) => continuation = Some(token),
                _ => return Ok(()),
            }
        }
    }

    fn marker_key(&self, owner: &Owner, lock_name: &LockName) -> String {
        format!(
            "{}{}",
            self.owner_folder(owner),
            encode_name(lock_name.as_str())
        )
    }
}

/// How a conditional write failed, by S3's error code (moto's HTTP statuses
/// differ from AWS's for some; the codes agree).
fn lost_race(code: Option<&str>) -> bool {
    matches!(
        code,
        // 412: the object is no longer the version read (or exists, for a create).
        Some("PreconditionFailed")
        // 409: a conflicting operation (e.g. a delete) landed during the
        // write, which did not; S3 asks for a fresh read and a retry.
        | Some("ConditionalRequestConflict")
        // 404 for If-Match: the object was deleted since it was read.
        | Some("NoSuchKey")
    )
}

impl Documents for S3Documents {
    type Version = String;

    fn check_name(&self, lock_name: &LockName) -> Result<(), StoreError> {
        // The marker's key is the longest; the lock's own key is shorter.
        let bytes = self.prefix.len()
            + ".owners/".len()
            + OWNER_HASH_DIGITS
            + 1
            + encode_name(lock_name.as_str()).len();
        if bytes > MAX_KEY_BYTES {
            return Err(StoreError::Refused {
                field: "lockName".into(),
                rule: format!(
                    "is too long for this S3 store: encoded under the prefix it needs a \
                     {bytes}-byte key, and S3 keys hold at most {MAX_KEY_BYTES} bytes"
                ),
            });
        }
        Ok(())
    }

    async fn read(&self, lock_name: &LockName) -> Result<Option<(String, LockDoc)>, StoreError> {
        let got = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(self.key(lock_name))
            .send()
            .await;
        let object = match got {
            Ok(object) => object,
            Err(error) if error.as_service_error().is_some_and(|e| e.is_no_such_key()) => {
                return Ok(None)
            }
            Err(error) => return Err(classify("GetObject", error)),
        };
        let etag = object
            .e_tag()
            .ok_or_else(|| StoreError::Unavailable("GetObject answered without an ETag".into()))?
            .to_string();
        let body = object
            .body
            .collect()
            .await
            .map_err(|error| StoreError::Unavailable(format!("GetObject body: {error}")))?;
        let doc = serde_json::from_slice(&body.into_bytes()).map_err(|error| {
            StoreError::Misconfigured(format!(
                "object {:?} is not a lock document ({error}); is the prefix shared with something else?",
                self.key(lock_name)
            ))
        })?;
        Ok(Some((etag, doc)))
    }

    async fn write(
        &self,
        lock_name: &LockName,
        read: Option<&String>,
        doc: &LockDoc,
        _now: EpochMillis,
    ) -> Result<bool, StoreError> {
        let body = serde_json::to_vec(doc)
            .map_err(|error| StoreError::Unavailable(format!("lock document: {error}")))?;
        let put = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(self.key(lock_name))
            .content_type("application/json")
            .body(ByteStream::from(body));
        let put = match read {
            None => put.if_none_match("*"),
            Some(etag) => put.if_match(etag),
        };
        match put.send().await {
            Ok(_) => Ok(true),
            Err(error) if lost_race(error.code()) => Ok(false),
            Err(error) => Err(classify("PutObject", error)),
        }
    }

    async fn confirm(
        &self,
        _: &LockName,
        _: &Owner,
        _: Option<&String>,
        _: Option<&LockDoc>,
        _: EpochMillis,
    ) -> Result<bool, StoreError> {
        // S3 reads are strongly consistent: the GET saw the newest version.
        Ok(true)
    }

    async fn mark(&self, owner: &Owner, lock_name: &LockName, _: u64) -> Result<(), StoreError> {
        // One object per owner and lock: S3 re-creates a deleted key at once.
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(self.marker_key(owner, lock_name))
            .body(ByteStream::from(owner.as_str().as_bytes().to_vec()))
            .send()
            .await
            .map_err(|error| classify("PutObject", error))?;
        Ok(())
    }

    async fn unmark(&self, owner: &Owner, lock_name: &LockName) -> Result<(), StoreError> {
        // S3 answers a delete of a missing key with success.
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .key(self.marker_key(owner, lock_name))
            .send()
            .await
            .map_err(|error| classify("DeleteObject", error))?;
        Ok(())
    }

    /// The objects one level below the prefix (`/` as delimiter: the
    /// `.owners/` folder comes back as a common prefix and is passed over).
    async fn names(&self, max: usize) -> Result<(Vec<LockName>, bool), StoreError> {
        let mut names = Vec::new();
        let mut truncated = false;
        self.each_lock_name(&self.prefix, Some("/"), |name| {
            truncated = names.len() == max;
            if !truncated {
                names.push(name);
            }
            !truncated
        })
        .await?;
        Ok((names, truncated))
    }

    async fn marked(&self, owner: &Owner) -> Result<Vec<LockName>, StoreError> {
        let mut names = Vec::new();
        self.each_lock_name(&self.owner_folder(owner), None, |name| {
            names.push(name);
            true
        })
        .await?;
        Ok(names)
    }
}
