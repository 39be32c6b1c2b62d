//! The lock's vocabulary, independent of any store.

use crate::vocab::error::LockError;
use crate::vocab::limits::Limit;
pub use crate::vocab::limits::MAX_LEASE_SECONDS;
pub use crate::vocab::time::EpochMillis;
use std::fmt;

pub const MAX_LOCK_NAME_BYTES: usize = 1024;
const MAX_OWNER_BYTES: usize = 2048;

/// The name of a lock: 1 to 1024 bytes, no control characters.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LockName(String);

/// Who holds a lock, normally a Step Functions execution ARN: 1 to 2048 bytes,
/// no control characters.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Owner(String);

fn check_text(field: &str, value: &str, max_bytes: usize) -> Result<(), LockError> {
    if value.is_empty() || value.len() > max_bytes {
        return Err(LockError::invalid(
            field,
            format!(
                "must be 1 to {max_bytes} bytes long (got {} bytes)",
                value.len()
            ),
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(LockError::invalid(
            field,
            "must not contain control characters",
        ));
    }
    Ok(())
}

impl LockName {
    pub fn new(value: impl Into<String>) -> Result<Self, LockError> {
        let value = value.into();
        check_text("lockName", &value, MAX_LOCK_NAME_BYTES)?;
        Ok(LockName(value))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Owner {
    pub fn new(value: impl Into<String>) -> Result<Self, LockError> {
        let value = value.into();
        check_text("owner", &value, MAX_OWNER_BYTES)?;
        Ok(Owner(value))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the sweep could ever look this owner up: it finds an ended
    /// execution's locks by the ARN the execution's event names. An owner
    /// that is no ARN (the CLI's `host:pid:random`) is never swept, so an
    /// owner marker for it would only be left behind when the run does not
    /// release (its take failed, its process was killed).
    pub fn may_be_swept(&self) -> bool {
        self.0.starts_with("arn:")
    }
}

impl fmt::Display for LockName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One grant of a lock to an owner, as the store recorded it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub lock_name: LockName,
    pub owner: Owner,
    /// Strictly increases with every new grant of this lock name; a renewal keeps it.
    pub fencing_token: u64,
    pub acquired_at: EpochMillis,
    pub expires_at: EpochMillis,
}

/// The current holder of a lock someone else asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    pub owner: String,
    pub fencing_token: u64,
    pub expires_at: EpochMillis,
    /// The item's last recorded release, `(owner, fencing token of the grant
    /// it ended)`; `None` if it records none.
    pub last_release: Option<(String, u64)>,
}

impl Holder {
    /// Whether `owner`'s own release had freed the lock before this holder
    /// took it: the item's last release is `owner`'s and, when the caller
    /// knows its grant's token, of that very grant. Without the token this is
    /// also true when `owner` released an earlier grant, took the lock again
    /// and lost that later grant to expiry (DESIGN.md, "Operations").
    pub fn follows_release_by(&self, owner: &Owner, fencing_token: Option<u64>) -> bool {
        match &self.last_release {
            Some((released_by, released_token)) => {
                released_by == owner.as_str()
                    && (fencing_token.is_none() || fencing_token == Some(*released_token))
            }
            None => false,
        }
    }
}

/// Why an acquire was refused: the lock's live holders filled the caller's
/// `limit` (one holder for a mutex).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Contention {
    /// The limit the caller asked for.
    pub limit: Limit,
    /// The live holders, the one whose lease ends first first; never empty.
    pub holders: Vec<Holder>,
}

impl Contention {
    /// The holder whose lease ends first: the earliest a permit may free.
    pub fn first_to_end(&self) -> Option<&Holder> {
        self.holders.first()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AcquireOutcome {
    /// A new grant: the lock was free or its lease had run out.
    Granted(Lease),
    /// The caller already held the lock; its lease now runs from this request.
    Renewed(Lease),
    /// Other owners hold live leases, as many as the caller's limit (or the
    /// queue is full, for a caller that asked to queue).
    Held(Contention),
    /// The caller waits in the lock's queue, `position` 1 being next; a
    /// release will hand it the lock by completing its task token.
    Queued { position: u32 },
}

/// The `outcome` field of acquire-lock's and release-lock's answers (and of
/// a woken waiter's task output): part of the public contract, which state
/// machines branch on (`Choice` rules), serialised in snake case exactly as
/// the strings it replaces. Code branches on the variant, never the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// A new grant.
    Granted,
    /// The caller already held the lock: its lease was extended.
    Renewed,
    /// The caller waits in the queue; the grant comes through its task token.
    Queued,
    /// This call, or an earlier attempt of it, freed the caller's grant.
    Released,
    /// A waiter that gave up left the queue; it held nothing.
    Withdrawn,
    /// Nobody held the lock.
    NotHeld,
    /// Someone else holds it.
    HeldByOther,
}

impl Outcome {
    /// The text the answers carry.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Granted => "granted",
            Outcome::Renewed => "renewed",
            Outcome::Queued => "queued",
            Outcome::Released => "released",
            Outcome::Withdrawn => "withdrawn",
            Outcome::NotHeld => "not_held",
            Outcome::HeldByOther => "held_by_other",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Comparing with the contract's text, as callers and tests read it.
impl PartialEq<&str> for Outcome {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReleaseOutcome {
    Released,
    /// Nobody held the lock (already released, or never taken).
    NotHeld,
    /// Someone else holds it now, normally after the caller's lease ran out.
    /// [`Holder::follows_release_by`] tells whether the caller's own release
    /// had freed it first (a retried release call).
    HeldByOther(Holder),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outcome_serialises_as_the_contracts_text() {
        let all = [
            (Outcome::Granted, "granted"),
            (Outcome::Renewed, "renewed"),
            (Outcome::Queued, "queued"),
            (Outcome::Released, "released"),
            (Outcome::Withdrawn, "withdrawn"),
            (Outcome::NotHeld, "not_held"),
            (Outcome::HeldByOther, "held_by_other"),
        ];
        for (outcome, text) in all {
            assert_eq!(serde_json::to_value(outcome).ok(), Some(text.into()));
            assert_eq!(outcome.as_str(), text);
            assert_eq!(outcome.to_string(), text);
            let back: Option<Outcome> = serde_json::from_value(text.into()).ok();
            assert_eq!(back, Some(outcome));
        }
    }

    #[test]
    fn names_reject_empty_oversized_and_control_characters() {
        assert!(LockName::new("nightly-etl").is_ok());
        assert!(LockName::new("").is_err());
        assert!(LockName::new("a".repeat(1025)).is_err());
        assert!(LockName::new("a".repeat(1024)).is_ok());
        assert!(LockName::new("tab\there").is_err());
        assert!(Owner::new("x".repeat(2048)).is_ok());
        assert!(Owner::new("x".repeat(2049)).is_err());
        assert!(Owner::new("nul\u{0}").is_err());
    }

    #[test]
    fn names_display_as_given() {
        // Answers and log lines carry them through Display.
        assert_eq!(
            LockName::new("nightly etl/é").unwrap().to_string(),
            "nightly etl/é"
        );
        assert_eq!(Owner::new("arn:exec:1").unwrap().to_string(), "arn:exec:1");
    }
}
