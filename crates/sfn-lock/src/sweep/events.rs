//! The event that says an execution ended: EventBridge's "Step Functions
//! Execution Status Change", as the sweep reads it.

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tracing::{info, warn};

use crate::vocab::model::Owner;

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

/// The owner whose locks must go, if `event` reports an execution that ended.
/// Logs why anything else is ignored.
pub(crate) fn ended_execution(event: &Value) -> Option<Owner> {
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
