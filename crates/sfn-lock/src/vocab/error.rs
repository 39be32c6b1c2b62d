//! The four (five, with the wait bound) outcomes a state machine can tell apart.
//!
//! Each variant maps to one stable `errorType` string that ASL `Retry` and `Catch`
//! match on. These names are a public API: never rename them.

use serde_json::json;

/// Why an acquire or release did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LockError {
    /// Live owners fill the caller's limit (one, for a mutex). Retry after a
    /// wait. `holder` and `expires_at` name the lease that ends first.
    #[error("{}", held(.lock_name, .holder, .expires_at, *.limit, .live_holders))]
    Unavailable {
        lock_name: String,
        holder: String,
        expires_at: String,
        limit: u32,
        /// Every live holder as `(owner, expiresAt)`, the first to end first.
        live_holders: Vec<(String, String)>,
    },
    /// The lock was still held when the caller's wait bound ran out.
    #[error("gave up waiting for lock {lock_name:?} after {max_wait_seconds} s; {}",
            held(.lock_name, .holder, .expires_at, *.limit, .live_holders))]
    WaitTimeout {
        lock_name: String,
        holder: String,
        expires_at: String,
        limit: u32,
        live_holders: Vec<(String, String)>,
        max_wait_seconds: u32,
    },
    /// The store did not answer while the caller may still wait. Step Functions
    /// counts a retrier's attempts across the whole wait, so a bounded
    /// store-error retrier would end a long wait after a few scattered
    /// hiccups: inside the bound this is one more reason to wait, under the
    /// wait's own name. (The write may have landed: the retry renews it.)
    #[error("lock {lock_name:?}: the lock store did not answer, waiting on: {detail}")]
    StoreUnavailableWhileWaiting { lock_name: String, detail: String },
    /// The event or the function's configuration breaks a rule. Nothing was written.
    #[error("{field} {rule}")]
    InvalidRequest { field: String, rule: String },
    /// The store could not be reached or asked us to slow down. Worth retrying.
    #[error("the lock store is unavailable: {detail}")]
    StoreUnavailable { detail: String },
    /// The store rejected the request for a reason a retry will not fix
    /// (missing table, access denied, a malformed item).
    #[error("the lock store is misconfigured: {detail}")]
    StoreMisconfigured { detail: String },
}

impl LockError {
    pub(crate) fn invalid(field: &str, rule: impl Into<String>) -> Self {
        LockError::InvalidRequest {
            field: field.to_owned(),
            rule: rule.into(),
        }
    }

    /// The `errorType` Step Functions matches in `Retry` and `Catch`.
    pub fn error_type(&self) -> &'static str {
        match self {
            LockError::Unavailable { .. } | LockError::StoreUnavailableWhileWaiting { .. } => {
                "LockUnavailable"
            }
            LockError::WaitTimeout { .. } => "LockWaitTimeout",
            LockError::InvalidRequest { .. } => "InvalidLockRequest",
            LockError::StoreUnavailable { .. } => "LockStoreUnavailable",
            LockError::StoreMisconfigured { .. } => "LockStoreMisconfigured",
        }
    }

    /// The `errorMessage`: a JSON object, so that an ASL can read its fields.
    /// Step Functions' `Cause` for a Lambda error is `{"errorType", "errorMessage"}`
    /// as a string: `States.StringToJson` on the Cause, then again on its
    /// `errorMessage`.
    pub fn error_message(&self) -> String {
        let message = self.to_string();
        let body = match self {
            LockError::Unavailable {
                lock_name,
                holder,
                expires_at,
                limit,
                live_holders,
            } => json!({
                "lockName": lock_name, "holder": holder, "expiresAt": expires_at,
                "limit": limit, "liveHolders": live_holders.len(),
                "holders": holders_json(live_holders), "message": message,
            }),
            LockError::StoreUnavailableWhileWaiting { lock_name, .. } => json!({
                "lockName": lock_name, "holder": null, "expiresAt": null,
                "storeUnavailable": true, "message": message,
            }),
            LockError::WaitTimeout {
                lock_name,
                holder,
                expires_at,
                limit,
                live_holders,
                max_wait_seconds,
            } => json!({
                "lockName": lock_name, "holder": holder, "expiresAt": expires_at,
                "limit": limit, "liveHolders": live_holders.len(),
                "holders": holders_json(live_holders),
                "maxWaitSeconds": max_wait_seconds, "message": message,
            }),
            LockError::InvalidRequest { field, rule } => {
                json!({ "field": field, "rule": rule, "message": message })
            }
            LockError::StoreUnavailable { .. } | LockError::StoreMisconfigured { .. } => {
                json!({ "message": message })
            }
        };
        body.to_string()
    }
}

/// Holders listed in an error message: enough to see who to wait for, while a
/// limit of 1000 keeps the message small.
pub const LISTED_HOLDERS: usize = 10;

/// Why a lock is not available, in words: the mutex's sentence as it always
/// was, and for a semaphore its limit, its live holders and the first end.
fn held(
    lock_name: &str,
    holder: &str,
    expires_at: &str,
    limit: u32,
    live_holders: &[(String, String)],
) -> String {
    if limit <= 1 {
        return format!("lock {lock_name:?} is held by {holder:?} until {expires_at}");
    }
    let listed: Vec<String> = live_holders
        .iter()
        .take(LISTED_HOLDERS)
        .map(|(owner, until)| format!("{owner:?} until {until}"))
        .collect();
    let more = live_holders.len().saturating_sub(LISTED_HOLDERS);
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    format!(
        "lock {lock_name:?} admits no more holders: {} live of limit {limit} ({}{more}); \
         the first lease ends at {expires_at}",
        live_holders.len(),
        listed.join(", "),
    )
}

fn holders_json(live_holders: &[(String, String)]) -> serde_json::Value {
    live_holders
        .iter()
        .take(LISTED_HOLDERS)
        .map(|(owner, expires_at)| json!({ "owner": owner, "expiresAt": expires_at }))
        .collect()
}

/// A store call that failed for a reason other than the lock's own state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Misconfigured(String),
    /// The request breaks a rule of this store (a size it cannot hold).
    /// Nothing was written.
    #[error("{field} {rule}")]
    Refused { field: String, rule: String },
}

impl From<StoreError> for LockError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Unavailable(detail) => LockError::StoreUnavailable { detail },
            StoreError::Misconfigured(detail) => LockError::StoreMisconfigured { detail },
            StoreError::Refused { field, rule } => LockError::InvalidRequest { field, rule },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_types_are_the_documented_names() {
        let cases = [
            (
                LockError::Unavailable {
                    lock_name: "a".into(),
                    holder: "b".into(),
                    expires_at: "c".into(),
                    limit: 1,
                    live_holders: vec![("b".into(), "c".into())],
                },
                "LockUnavailable",
            ),
            (
                LockError::WaitTimeout {
                    lock_name: "a".into(),
                    holder: "b".into(),
                    expires_at: "c".into(),
                    limit: 1,
                    live_holders: vec![("b".into(), "c".into())],
                    max_wait_seconds: 1,
                },
                "LockWaitTimeout",
            ),
            (
                LockError::invalid("owner", "is required"),
                "InvalidLockRequest",
            ),
            (
                StoreError::Unavailable("x".into()).into(),
                "LockStoreUnavailable",
            ),
            (
                StoreError::Misconfigured("x".into()).into(),
                "LockStoreMisconfigured",
            ),
        ];
        for (error, expected) in cases {
            assert_eq!(error.error_type(), expected);
            let message: serde_json::Value =
                serde_json::from_str(&error.error_message()).expect("message is JSON");
            assert!(message["message"].is_string());
        }
    }

    #[test]
    fn waiting_on_a_silent_store_keeps_the_wait_s_name() {
        let error = LockError::StoreUnavailableWhileWaiting {
            lock_name: "etl".into(),
            detail: "timeout".into(),
        };
        assert_eq!(error.error_type(), "LockUnavailable");
        let message: serde_json::Value = serde_json::from_str(&error.error_message()).unwrap();
        assert_eq!(message["storeUnavailable"], true);
        assert_eq!(message["lockName"], "etl");
    }

    #[test]
    fn contention_message_names_holder_and_expiry() {
        let error = LockError::Unavailable {
            lock_name: "etl".into(),
            holder: "arn:exec:1".into(),
            expires_at: "2026-01-01T00:00:00Z".into(),
            limit: 1,
            live_holders: vec![("arn:exec:1".into(), "2026-01-01T00:00:00Z".into())],
        };
        let message: serde_json::Value = serde_json::from_str(&error.error_message()).unwrap();
        assert_eq!(message["holder"], "arn:exec:1");
        assert_eq!(message["expiresAt"], "2026-01-01T00:00:00Z");
        assert_eq!(message["lockName"], "etl");
    }

    #[test]
    fn a_full_semaphore_names_its_limit_its_holders_and_the_first_end() {
        let live_holders: Vec<(String, String)> = (0..12)
            .map(|n| (format!("arn:exec:{n}"), format!("2026-01-01T00:00:{n:02}Z")))
            .collect();
        let error = LockError::Unavailable {
            lock_name: "api".into(),
            holder: "arn:exec:0".into(),
            expires_at: "2026-01-01T00:00:00Z".into(),
            limit: 12,
            live_holders,
        };
        let message: serde_json::Value = serde_json::from_str(&error.error_message()).unwrap();
        assert_eq!(message["limit"], 12);
        assert_eq!(message["liveHolders"], 12);
        assert_eq!(message["holders"].as_array().unwrap().len(), LISTED_HOLDERS);
        assert_eq!(message["holders"][0]["owner"], "arn:exec:0");
        let text = message["message"].as_str().unwrap();
        assert!(text.contains("12 live of limit 12"), "{text}");
        assert!(text.contains("and 2 more"), "{text}");
        assert!(
            text.contains("first lease ends at 2026-01-01T00:00:00Z"),
            "{text}"
        );
        assert!(!text.contains("arn:exec:11"), "{text}");
    }
}
