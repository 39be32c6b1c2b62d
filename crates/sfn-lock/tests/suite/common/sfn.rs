//! Step Functions and SQS on the local moto server, for the sweep's tests.
//! moto runs no state machine here: a started execution stays RUNNING until
//! it is stopped (then ABORTED, with a stop date), which is all the sweep reads.

use aws_sdk_sfn::types::ExecutionStatus;
use sfn_lock::aws::config::sdk_config;
use sfn_lock::aws::executions::{SqsRequeue, StepFunctions};
use sfn_lock::sweep::policy::{Attached, SweepPolicy};
use sfn_lock::{
    AcquireOutcome, DynamoStore, EpochMillis, LeaseSeconds, LockName, LockStore, Owner,
};

use super::{client, get_item, table_name, unique};

pub const ACCOUNT: &str = "123456789012";
/// The state machines the local stack's `release-execution-locks` serves
/// (scripts/local-stack.sh sets the same names).
pub const LOCKED: &str = "sfn-lock-locked";
pub const ATTACHED: &str = "sfn-lock-attached";
pub const TARGET: &str = "sfn-lock-target";
pub const STRANGER: &str = "someone-elses";

pub fn state_machine_arn(name: &str) -> String {
    format!("arn:aws:states:us-east-1:{ACCOUNT}:stateMachine:{name}")
}

pub async fn sfn() -> aws_sdk_sfn::Client {
    aws_sdk_sfn::Client::new(&sdk_config().await)
}

/// Creates the state machine unless it exists; returns its ARN.
pub async fn state_machine(name: &str) -> String {
    let created = sfn()
        .await
        .create_state_machine()
        .name(name)
        .role_arn(format!("arn:aws:iam::{ACCOUNT}:role/sfn-lock-test"))
        .definition(r#"{"StartAt":"Done","States":{"Done":{"Type":"Succeed"}}}"#)
        .send()
        .await;
    if let Err(error) = created {
        let exists = error
            .as_service_error()
            .is_some_and(|e| e.is_state_machine_already_exists());
        assert!(exists, "CreateStateMachine {name}: {error:?}");
    }
    state_machine_arn(name)
}

/// Starts an execution (it stays RUNNING); returns its ARN.
pub async fn start(state_machine_name: &str, name: &str) -> String {
    let arn = state_machine(state_machine_name).await;
    sfn()
        .await
        .start_execution()
        .state_machine_arn(arn)
        .name(name)
        .input("{}")
        .send()
        .await
        .expect("StartExecution on moto")
        .execution_arn
}

/// Stops an execution; returns the stop date Step Functions recorded.
pub async fn stop(execution_arn: &str) -> EpochMillis {
    let client = sfn().await;
    client
        .stop_execution()
        .execution_arn(execution_arn)
        .send()
        .await
        .expect("StopExecution on moto");
    let described = client
        .describe_execution()
        .execution_arn(execution_arn)
        .send()
        .await
        .expect("DescribeExecution on moto");
    assert_eq!(described.status(), &ExecutionStatus::Aborted);
    EpochMillis(
        described
            .stop_date()
            .expect("stop date")
            .to_millis()
            .expect("millis"),
    )
}

pub async fn status(execution_arn: &str) -> ExecutionStatus {
    sfn()
        .await
        .describe_execution()
        .execution_arn(execution_arn)
        .send()
        .await
        .expect("DescribeExecution on moto")
        .status()
        .clone()
}

/// A fresh queue for the sweep's deferred events; returns its URL.
pub async fn queue() -> String {
    sqs()
        .await
        .create_queue()
        .queue_name(unique("sfn-lock-cleanup"))
        .send()
        .await
        .expect("CreateQueue on moto")
        .queue_url
        .expect("queue URL")
}

pub async fn sqs() -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::new(&sdk_config().await)
}

/// Messages waiting in `queue_url` for their delay to pass.
pub async fn delayed_messages(queue_url: &str) -> usize {
    let attributes = sqs()
        .await
        .get_queue_attributes()
        .queue_url(queue_url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesDelayed)
        .send()
        .await
        .expect("GetQueueAttributes on moto");
    attributes
        .attributes()
        .and_then(|map| {
            map.get(&aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesDelayed)
        })
        .and_then(|count| count.parse().ok())
        .expect("a delayed-message count")
}

pub type TestSweeper = sfn_lock::sweep::cleanup::Sweeper<DynamoStore, StepFunctions, SqsRequeue>;

/// The sweep as deployed, serving LOCKED and ATTACHED (whose child runs on TARGET).
pub async fn sweeper(grace_seconds: u32, queue_url: &str) -> TestSweeper {
    let store = DynamoStore::new(client().await, table_name());
    sweeper_on(store, grace_seconds, queue_url).await
}

/// [`sweeper`] on any store.
pub async fn sweeper_on<S: LockStore>(
    store: S,
    grace_seconds: u32,
    queue_url: &str,
) -> sfn_lock::sweep::cleanup::Sweeper<S, StepFunctions, SqsRequeue> {
    let sdk = sdk_config().await;
    sfn_lock::sweep::cleanup::Sweeper {
        store,
        executions: StepFunctions::new(aws_sdk_sfn::Client::new(&sdk)),
        requeue: Some(SqsRequeue::new(aws_sdk_sqs::Client::new(&sdk), queue_url)),
        policy: SweepPolicy {
            swept_state_machines: vec![state_machine_arn(LOCKED), state_machine_arn(ATTACHED)],
            grace_seconds,
            attached: Some(Attached {
                parent_state_machine: state_machine_arn(ATTACHED),
                target_state_machine: state_machine_arn(TARGET),
            }),
        },
    }
}

/// Grants `lock` to `owner` (a one-hour lease), as an acquire function whose
/// clock read `now` would; asserts it was a new grant.
pub async fn hold_at(store: &impl LockStore, lock: &str, owner: &str, now: EpochMillis) {
    let outcome = store
        .acquire(
            &LockName::new(lock).unwrap(),
            &Owner::new(owner).unwrap(),
            LeaseSeconds::new("leaseSeconds", 3600).unwrap(),
            now,
        )
        .await
        .unwrap();
    assert!(matches!(outcome, AcquireOutcome::Granted(_)), "{outcome:?}");
}

/// [`hold_at`] now.
pub async fn hold(store: &impl LockStore, lock: &str, owner: &str) {
    hold_at(store, lock, owner, EpochMillis::now()).await;
}

/// Who holds `lock` according to the table, if anyone.
pub async fn owner_of(lock: &str) -> Option<String> {
    let item = get_item(&client().await, lock).await?;
    item.get("owner")
        .and_then(|owner| owner.as_s().ok())
        .cloned()
}
