//! Releasing the locks of executions that ended without releasing them.
//!
//! A `Catch` never runs when an execution is stopped (`ABORTED`) or reaches
//! the state machine's own `TimeoutSeconds` (`TIMED_OUT`). EventBridge reports
//! those ends; this sweep then releases every lock the execution still owns,
//! found through the store's owner index, so per-key lock names need not be
//! known in advance.
//!
//! The sweep runs late on purpose: template.yaml routes the events through an
//! SQS queue whose delay (`CleanupDelaySeconds`) exceeds the acquire
//! function's timeout. An acquire already in flight when the execution ended
//! has therefore landed before the sweep looks, and is released with the rest;
//! the same delay lets an aborted execution's in-flight task finish before
//! another execution may take the lock. The lease remains the last safety net.

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use aws_lambda_events::event::sqs::SqsEvent;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tracing::{info, warn};

use crate::error::LockError;
use crate::model::{EpochMillis, Owner, ReleaseOutcome};
use crate::store::LockStore;

const EXECUTION_STATUS_CHANGE: &str = "Step Functions Execution Status Change";
const STEP_FUNCTIONS_SOURCE: &str = "aws.states";
/// Every terminal status. ABORTED and TIMED_OUT run no `Catch`; FAILED and
/// SUCCEEDED normally released already (the sweep then finds nothing), but a
/// release that failed after its retries is caught here too.
const ENDED: &[&str] = &["ABORTED", "TIMED_OUT", "FAILED", "SUCCEEDED"];

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExecutionStatusChange {
    execution_arn: String,
    status: String,
}

/// One lock the sweep released.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleasedLock {
    pub lock_name: String,
    pub owner: String,
}

/// What one invocation of the sweep did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepReport {
    pub released: Vec<ReleasedLock>,
    /// Events (or SQS records) that were not an ended execution of interest.
    pub ignored: usize,
}

/// Handles an SQS batch of EventBridge events (the deployed path) or a single
/// EventBridge event (a direct invocation). Events of other shapes are logged
/// and ignored rather than failed: a failure would only be redelivered forever.
/// A store failure is an error, so SQS delivers the batch again; every release
/// is conditional, so a repeat changes nothing.
pub async fn sweep<S: LockStore>(
    store: &S,
    event: &Value,
    now: EpochMillis,
) -> Result<SweepReport, LockError> {
    let mut report = SweepReport::default();
    let events: Vec<Value> = if event.get("Records").is_some() {
        match SqsEvent::deserialize(event) {
            Ok(batch) => batch
                .records
                .into_iter()
                .map(|record| {
                    record
                        .body
                        .and_then(|body| serde_json::from_str(&body).ok())
                        .unwrap_or(Value::Null)
                })
                .collect(),
            Err(error) => {
                warn!(error = %error, "ignored an event with Records that is not an SQS batch");
                report.ignored += 1;
                return Ok(report);
            }
        }
    } else {
        vec![event.clone()]
    };
    for event in &events {
        match ended_execution(event) {
            Some(owner) => report
                .released
                .extend(release_all(store, &owner, now).await?),
            None => report.ignored += 1,
        }
    }
    Ok(report)
}

/// The owner whose locks must go, if `event` reports an execution that ended.
/// Logs why anything else is ignored.
fn ended_execution(event: &Value) -> Option<Owner> {
    let change = match EventBridgeEvent::<ExecutionStatusChange>::deserialize(event) {
        Ok(change) => change,
        Err(error) => {
            warn!(error = %error, "ignored an event that is not a Step Functions execution status change");
            return None;
        }
    };
    if change.source != STEP_FUNCTIONS_SOURCE || change.detail_type != EXECUTION_STATUS_CHANGE {
        warn!(source = %change.source, detail_type = %change.detail_type, "ignored an event from another source");
        return None;
    }
    if !ENDED.contains(&change.detail.status.as_str()) {
        info!(execution = %change.detail.execution_arn, status = %change.detail.status,
              "ignored a status of an execution that has not ended");
        return None;
    }
    match Owner::new(change.detail.execution_arn) {
        Ok(owner) => Some(owner),
        Err(error) => {
            warn!(error = %error, "ignored an event whose executionArn is not a valid owner");
            None
        }
    }
}

async fn release_all<S: LockStore>(
    store: &S,
    owner: &Owner,
    now: EpochMillis,
) -> Result<Vec<ReleasedLock>, LockError> {
    let mut released = Vec::new();
    for lock_name in store.locks_held_by(owner).await? {
        match store.release(&lock_name, owner, now).await? {
            ReleaseOutcome::Released => {
                info!(lock_name = %lock_name, owner = %owner, "released a lock its ended execution still held");
                released.push(ReleasedLock {
                    lock_name: lock_name.to_string(),
                    owner: owner.to_string(),
                });
            }
            // The index lags the table: the lock moved on after the query.
            ReleaseOutcome::NotHeld => {
                info!(lock_name = %lock_name, owner = %owner, "ended execution's lock was already released")
            }
            ReleaseOutcome::HeldByOther(holder) => {
                info!(lock_name = %lock_name, owner = %owner, holder = %holder.owner,
                      "ended execution's lock was already taken over")
            }
        }
    }
    if released.is_empty() {
        info!(owner = %owner, "ended execution held no locks");
    }
    Ok(released)
}
