//! Glue between the Lambda runtime and the services: each function's state
//! built once at cold start from its environment (`settings`), its logging,
//! and the three handlers.

#[cfg(test)]
mod contract_facts;
mod logging;
mod settings;

use std::sync::Arc;

use lambda_runtime::{Diagnostic, LambdaEvent};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use tracing::warn;

use crate::aws::config as sdk_setup;
use crate::aws::executions::{SqsRequeue, StepFunctions};
use crate::aws::waker::SfnWaker;
use crate::locker::Locker;
use crate::metrics::Metrics;
use crate::store::any::AnyStore;
use crate::store::url::StoreUrl;
use crate::sweep::cleanup::{SweepReport, Sweeper};
use crate::sweep::policy::SweepPolicy;
use crate::sweep::reconcile::{is_reconcile, ReconcileLimits, ReconcileReport};
use crate::vocab::answer::{AcquireAnswer, ReleaseResponse};
use crate::vocab::deadline::budget;
use crate::vocab::error::LockError;
use crate::vocab::model::EpochMillis;
pub use logging::init_logging;
use logging::log_misconfiguration;
pub use settings::Config;

/// An invocation's payload. Reading it can never fail: JSON the parser
/// rejects (a lone surrogate escape, a number beyond `f64`, a truncated body)
/// becomes `Malformed`, so the caller gets `InvalidLockRequest` instead of the
/// runtime's own deserialisation error, whose `errorType` no ASL can match.
#[derive(Clone, Debug, PartialEq)]
pub enum Payload {
    Json(Value),
    Malformed(String),
}

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // The runtime reads nothing after the payload, so giving up mid-way is safe.
        Ok(match Value::deserialize(deserializer) {
            Ok(json) => Payload::Json(json),
            Err(error) => Payload::Malformed(error.to_string()),
        })
    }
}

impl Payload {
    fn json(&self) -> Result<&Value, LockError> {
        match self {
            Payload::Json(json) => Ok(json),
            Payload::Malformed(error) => Err(LockError::invalid(
                "event",
                format!("must be valid JSON ({error})"),
            )),
        }
    }
}

/// The lock as a Lambda function holds it: a locker, or the configuration error
/// every invocation answers with (a function that cannot start would give
/// Step Functions an init failure it cannot tell from a crash).
pub type ConfiguredLocker = Result<Locker<AnyStore>, LockError>;

/// Reads the configuration and builds the clients once, at cold start.
pub async fn locker_from_env() -> ConfiguredLocker {
    let config = Config::from_env().inspect_err(log_misconfiguration)?;
    let metrics = Metrics::from_env().inspect_err(log_misconfiguration)?;
    let sdk = sdk_setup::try_sdk_config()
        .await
        .inspect_err(log_misconfiguration)?;
    let store = store_with_waker(&config.store, &sdk).inspect_err(log_misconfiguration)?;
    tracing::debug!(store = %config.store, "lock store");
    Ok(Locker::new(store, config.default_lease)
        .with_max_lease(config.max_lease)
        .with_metrics(metrics))
}

/// The configured store; a DynamoDB store also hands off to queued waiters,
/// waking them through Step Functions. The CLI opens its store so too.
pub fn store_with_waker(
    url: &StoreUrl,
    sdk: &aws_config::SdkConfig,
) -> Result<AnyStore, LockError> {
    Ok(match AnyStore::from_url(url, sdk)? {
        AnyStore::DynamoDb(store) => AnyStore::DynamoDb(
            store.with_waker(Arc::new(SfnWaker::new(sdk_setup::waker_client(sdk)))),
        ),
        #[allow(unreachable_patterns)] // a DynamoDB-only build has no other store
        other => other,
    })
}

/// Moved: [`crate::aws::config::dynamodb_client`].
#[deprecated(
    since = "0.2.0",
    note = "moved to `sfn_lock::aws::config::dynamodb_client`"
)]
pub async fn dynamodb_client() -> aws_sdk_dynamodb::Client {
    crate::aws::config::dynamodb_client().await
}

/// Moved: [`crate::aws::config::sdk_config`].
#[deprecated(since = "0.2.0", note = "moved to `sfn_lock::aws::config::sdk_config`")]
pub async fn sdk_config() -> aws_config::SdkConfig {
    crate::aws::config::sdk_config().await
}

/// Moved: [`crate::aws::config::try_sdk_config`].
#[deprecated(
    since = "0.2.0",
    note = "moved to `sfn_lock::aws::config::try_sdk_config`"
)]
pub async fn try_sdk_config() -> Result<aws_config::SdkConfig, LockError> {
    crate::aws::config::try_sdk_config().await
}

/// Moved: [`crate::aws::config::waker_client`].
#[deprecated(
    since = "0.2.0",
    note = "moved to `sfn_lock::aws::config::waker_client`"
)]
pub fn waker_client(sdk: &aws_config::SdkConfig) -> aws_sdk_sfn::Client {
    crate::aws::config::waker_client(sdk)
}

/// Where the sweep sends an event that came too early back to (optional).
pub(crate) const CLEANUP_QUEUE_URL: &str = "CLEANUP_QUEUE_URL";

/// The cleanup function's state: the sweep, and the metrics of what it frees.
pub struct SweepFunction {
    pub sweeper: Sweeper<AnyStore, StepFunctions, SqsRequeue>,
    pub metrics: Metrics,
}

/// The sweep as the cleanup function holds it, or its configuration error.
pub type ConfiguredSweeper = Result<SweepFunction, LockError>;

/// Reads the configuration and builds the clients once, at cold start:
/// the store (`LOCK_STORE_URL`), the [`SweepPolicy`] variables, and `CLEANUP_QUEUE_URL`
/// (where an event that came too early goes back to, with a delay).
pub async fn sweeper_from_env() -> ConfiguredSweeper {
    let lookup = |name: &str| std::env::var(name).ok();
    let config = Config::from_lookup(lookup).inspect_err(log_misconfiguration)?;
    let policy = SweepPolicy::from_lookup(lookup).inspect_err(log_misconfiguration)?;
    let metrics = Metrics::from_env().inspect_err(log_misconfiguration)?;
    let sdk = sdk_setup::try_sdk_config()
        .await
        .inspect_err(log_misconfiguration)?;
    let requeue = lookup(CLEANUP_QUEUE_URL)
        .filter(|url| !url.trim().is_empty())
        .map(|url| SqsRequeue::new(aws_sdk_sqs::Client::new(&sdk), url));
    let sweeper = Sweeper {
        store: store_with_waker(&config.store, &sdk).inspect_err(log_misconfiguration)?,
        executions: StepFunctions::new(aws_sdk_sfn::Client::new(&sdk)),
        requeue,
        policy,
    };
    Ok(SweepFunction { sweeper, metrics })
}

/// What the cleanup function answers: the sweep's report (an SQS batch's
/// `batchItemFailures` among it), or a reconciler run's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum SweepAnswer {
    Sweep(SweepReport),
    Reconcile(ReconcileReport),
}

/// The cleanup function: an SQS batch of execution ends (or one such event)
/// is swept; the reconciler's scheduled input (`{"sfnLockReconcile": {}}`)
/// runs the reconciler (`reconcile.rs`). Both within the invocation's deadline.
pub async fn handle_sweep(
    sweeper: &ConfiguredSweeper,
    event: LambdaEvent<Payload>,
) -> Result<SweepAnswer, Diagnostic> {
    let SweepFunction { sweeper, metrics } = configured(sweeper)?;
    match &event.payload {
        Payload::Json(json) if is_reconcile(json) => {
            let now = EpochMillis::now();
            // Boxed, as the sweep: the binary's async layout otherwise
            // exceeds rustc's query depth.
            let report = Box::pin(sweeper.reconcile_within(
                now,
                budget(event.context.deadline),
                ReconcileLimits::default(),
            ))
            .await?;
            metrics.reconciled(&report, now);
            Ok(SweepAnswer::Reconcile(report))
        }
        Payload::Json(json) => {
            // Per record: a batch cut short reports its unfinished records alone.
            let now = EpochMillis::now();
            let report =
                Box::pin(sweeper.sweep_within(json, now, budget(event.context.deadline))).await?;
            metrics.swept(&report, now);
            Ok(SweepAnswer::Sweep(report))
        }
        Payload::Malformed(error) => {
            warn!(error, "ignored an event that is not valid JSON");
            Ok(SweepAnswer::Sweep(SweepReport {
                ignored: 1,
                ..SweepReport::default()
            }))
        }
    }
}

pub async fn handle_acquire(
    locker: &ConfiguredLocker,
    event: LambdaEvent<Payload>,
) -> Result<AcquireAnswer, Diagnostic> {
    let (locker, payload) = (configured(locker)?, lock_event(&event.payload)?);
    // The budget applies inside the lock's rules: a cut store call is a store
    // error, which a caller still inside its wait bound waits out.
    let budget = budget(event.context.deadline);
    Ok(locker
        .answer_within(payload, EpochMillis::now(), budget)
        .await?)
}

pub async fn handle_release(
    locker: &ConfiguredLocker,
    event: LambdaEvent<Payload>,
) -> Result<ReleaseResponse, Diagnostic> {
    let (locker, payload) = (configured(locker)?, lock_event(&event.payload)?);
    // Within the invocation's time, as acquire: the locker logs a cut call
    // as it logs every store error, naming the lock.
    let budget = budget(event.context.deadline);
    Ok(locker
        .release_within(payload, EpochMillis::now(), budget)
        .await?)
}

/// The function's configuration error, if any, answers every invocation.
fn configured<T>(setup: &Result<T, LockError>) -> Result<&T, Diagnostic> {
    setup
        .as_ref()
        .map_err(|error| Diagnostic::from(error.clone()))
}

fn lock_event(payload: &Payload) -> Result<&Value, Diagnostic> {
    Ok(payload
        .json()
        .inspect_err(|error| warn!(error = %error, "refused a malformed event"))?)
}

/// What the Lambda runtime answers for an error: its `errorType` is what
/// ASL `Retry` and `Catch` match.
impl From<LockError> for Diagnostic {
    fn from(error: LockError) -> Self {
        Diagnostic {
            error_type: error.error_type().to_owned(),
            error_message: error.error_message(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_json_becomes_a_typed_refusal() {
        for body in [
            r#"{"lockName": "\ud800"}"#,
            r#"{"leaseSeconds": 1e400}"#,
            r#"{"lockName":"#,
        ] {
            let payload: Payload = serde_json::from_str(body).unwrap_or_else(|_| {
                let mut reader = serde_json::Deserializer::from_str(body);
                Payload::deserialize(&mut reader).expect("Payload never fails")
            });
            assert!(
                matches!(payload.json(), Err(LockError::InvalidRequest { field, .. }) if field == "event"),
                "{body}"
            );
        }
    }
}
