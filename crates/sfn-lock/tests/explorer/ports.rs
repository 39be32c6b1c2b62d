//! The sweep's two ports, answered from the explorer's world: which
//! executions ended and when (Step Functions' `DescribeExecution`), and the
//! events the sweep sends back to its queue to look at later.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use sfn_lock::ports::executions::{ExecutionFacts, ExecutionStatus, Executions, Requeue};
use sfn_lock::{EpochMillis, StoreError};

pub const MACHINE: &str = "arn:aws:states:us-east-1:123456789012:stateMachine:explored";

#[derive(Clone, Debug, Default)]
pub struct World {
    /// Execution ARN → when it ended (absent: running).
    pub ended: Arc<Mutex<BTreeMap<String, EpochMillis>>>,
    /// Events the sweep sent back, with their delay in seconds.
    pub requeued: Arc<Mutex<Vec<(String, u32)>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl World {
    pub fn end(&self, execution: &str, at: EpochMillis) {
        lock(&self.ended).entry(execution.to_owned()).or_insert(at);
    }

    pub fn take_requeued(&self) -> Vec<(String, u32)> {
        std::mem::take(&mut *lock(&self.requeued))
    }
}

impl Executions for World {
    async fn describe(&self, execution_arn: &str) -> Result<Option<ExecutionFacts>, StoreError> {
        let stop_date = lock(&self.ended).get(execution_arn).copied();
        Ok(Some(ExecutionFacts {
            state_machine_arn: MACHINE.to_owned(),
            status: match stop_date {
                Some(_) => ExecutionStatus::Ended,
                None => ExecutionStatus::Live,
            },
            stop_date,
            redrive_count: 0,
        }))
    }

    async fn stop(&self, _execution_arn: &str, _cause: &str) -> Result<(), StoreError> {
        Ok(())
    }
}

impl Requeue for World {
    async fn requeue(&self, body: &str, delay_seconds: u32) -> Result<(), StoreError> {
        lock(&self.requeued).push((body.to_owned(), delay_seconds));
        Ok(())
    }
}
