//! Glue between the Lambda runtime and [`Locker`]: configuration from the
//! environment, the SDK client, logging, and the two handlers.

use std::sync::Arc;
use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::BehaviorVersion;
use aws_sdk_dynamodb::config::SharedHttpClient;
use lambda_runtime::{Diagnostic, LambdaEvent};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use tracing::warn;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::any_store::AnyStore;
use crate::cleanup::{SweepReport, Sweeper};
use crate::deadline::{budget, within_deadline};
use crate::error::LockError;
use crate::executions::{SqsRequeue, StepFunctions};
use crate::https;
use crate::lock::{AcquireAnswer, Locker, ReleaseResponse, DEFAULT_LEASE_SECONDS};
use crate::metrics::Metrics;
use crate::model::EpochMillis;
use crate::queue::SfnWaker;
use crate::reconcile::{is_reconcile, ReconcileLimits, ReconcileReport};
use crate::request::LeaseSeconds;
use crate::store_url::StoreUrl;
use crate::sweep_policy::SweepPolicy;

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

/// The function's settings, read from its environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// `LOCK_STORE_URL`, or `LOCK_TABLE_NAME` for a DynamoDB table: required.
    pub store: StoreUrl,
    /// `DEFAULT_LEASE_SECONDS`, optional; defaults to 900.
    pub default_lease: LeaseSeconds,
    /// `MAX_LEASE_SECONDS`, optional: the longest lease a request may ask
    /// for; it also bounds the default lease.
    pub max_lease: Option<LeaseSeconds>,
}

impl Config {
    pub fn from_env() -> Result<Self, LockError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, LockError> {
        let store = StoreUrl::from_lookup(&lookup)?;
        let seconds = |name: &str| -> Result<Option<LeaseSeconds>, LockError> {
            let Some(text) = lookup(name) else {
                return Ok(None);
            };
            let seconds = text
                .trim()
                .parse::<i64>()
                .map_err(|_| LockError::invalid(name, "must be an integer number of seconds"))?;
            LeaseSeconds::new(name, seconds).map(Some)
        };
        let default_lease = match seconds("DEFAULT_LEASE_SECONDS")? {
            Some(lease) => lease,
            None => LeaseSeconds::new("DEFAULT_LEASE_SECONDS", i64::from(DEFAULT_LEASE_SECONDS))?,
        };
        // CloudFormation cannot add: a cap built from a stack's lease terms is
        // written as their sum, `a+b+c`, and the function adds them.
        let max_lease = match lookup("MAX_LEASE_SECONDS") {
            None => None,
            Some(text) => {
                let terms: Option<Vec<i64>> = text
                    .split('+')
                    .map(|term| term.trim().parse().ok())
                    .collect();
                let sum = terms
                    .filter(|terms| terms.iter().all(|term| *term >= 0))
                    .and_then(|terms| terms.into_iter().try_fold(0_i64, i64::checked_add))
                    .ok_or_else(|| {
                        LockError::invalid(
                            "MAX_LEASE_SECONDS",
                            "must be an integer number of seconds, or a sum of them (a+b+c)",
                        )
                    })?;
                Some(LeaseSeconds::new("MAX_LEASE_SECONDS", sum)?)
            }
        };
        // A cap (the template's MaxLeaseSeconds) may be shorter than the
        // default lease: a caller without leaseSeconds then gets the cap, said
        // once at start rather than refused on every acquire.
        let default_lease = match max_lease.filter(|max| max.get() < default_lease.get()) {
            Some(max) => {
                tracing::warn!(
                    default_lease = default_lease.get(),
                    max_lease = max.get(),
                    "DEFAULT_LEASE_SECONDS is above MAX_LEASE_SECONDS: requests without leaseSeconds get MAX_LEASE_SECONDS"
                );
                max
            }
            None => default_lease,
        };
        Ok(Config {
            store,
            default_lease,
            max_lease,
        })
    }
}

/// A DynamoDB client from the standard AWS environment (`AWS_REGION`,
/// `AWS_ENDPOINT_URL_DYNAMODB`, credentials), with timeouts short enough that
/// an unreachable store becomes `LockStoreUnavailable` well inside the
/// function's own timeout instead of a hung invocation.
pub async fn dynamodb_client() -> aws_sdk_dynamodb::Client {
    aws_sdk_dynamodb::Client::new(&sdk_config().await)
}

/// The shared SDK configuration behind [`dynamodb_client`]. A trust store
/// the environment names but that cannot be used ([`https`]) makes every
/// request fail with that error; [`try_sdk_config`] reports it up front.
pub async fn sdk_config() -> aws_config::SdkConfig {
    match https::https_client() {
        Ok(client) => sdk_config_with(client).await,
        Err(error) => sdk_config_with(https::refusing_client(&error)).await,
    }
}

/// [`sdk_config`], or the trust store's configuration error: what the
/// functions build at init, so that a bad bundle is logged once and answered
/// as `LockStoreMisconfigured`.
pub async fn try_sdk_config() -> Result<aws_config::SdkConfig, LockError> {
    Ok(sdk_config_with(https::https_client()?).await)
}

async fn sdk_config_with(http_client: SharedHttpClient) -> aws_config::SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .http_client(http_client)
        .timeout_config(timeout_config())
        .retry_config(retry_config())
        .load()
        .await
}

/// Every client's timeouts: a named function, so that the time budget's
/// facts (contract/code-facts.json) are read from what the clients get.
pub(crate) fn timeout_config() -> TimeoutConfig {
    TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(1))
        .operation_attempt_timeout(Duration::from_secs(2))
        .operation_timeout(Duration::from_secs(4))
        .build()
}

/// Every client's retries but the waker's ([`waker_client`]).
pub(crate) fn retry_config() -> RetryConfig {
    RetryConfig::standard().with_max_attempts(3)
}

/// Reads the configuration and builds the clients once, at cold start.
pub async fn locker_from_env() -> ConfiguredLocker {
    let config = Config::from_env().inspect_err(log_misconfiguration)?;
    let metrics = Metrics::from_env().inspect_err(log_misconfiguration)?;
    let sdk = try_sdk_config().await.inspect_err(log_misconfiguration)?;
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
        AnyStore::DynamoDb(store) => {
            AnyStore::DynamoDb(store.with_waker(Arc::new(SfnWaker::new(waker_client(sdk)))))
        }
        #[allow(unreachable_patterns)] // a DynamoDB-only build has no other store
        other => other,
    })
}

/// The Step Functions client that wakes queued waiters: no SDK retries;
/// [`SfnWaker`] repeats a call itself and says why.
pub fn waker_client(sdk: &aws_config::SdkConfig) -> aws_sdk_sfn::Client {
    let config = aws_sdk_sfn::config::Builder::from(sdk)
        .retry_config(RetryConfig::disabled())
        .build();
    aws_sdk_sfn::Client::from_conf(config)
}

/// Logs as Lambda's advanced logging controls ask: JSON when
/// `AWS_LAMBDA_LOG_FORMAT=JSON`, level from `AWS_LAMBDA_LOG_LEVEL` (or `RUST_LOG`).
/// The runtime's own TRACE output holds whole events, so it is capped at DEBUG:
/// logs never carry more of an event than the lock fields. The runtime also
/// logs every error response at ERROR; the handler has already logged each
/// decision once at its own level, so that echo is turned off (a panic still
/// reaches stderr through the panic hook).
pub fn init_logging() {
    let level = std::env::var("AWS_LAMBDA_LOG_LEVEL")
        .or_else(|_| std::env::var("RUST_LOG"))
        .ok()
        .and_then(|text| text.parse::<LevelFilter>().ok())
        .unwrap_or(LevelFilter::INFO);
    // Targets, not EnvFilter: the same directives without the regex engine
    // EnvFilter links in (~0.3 MB of the binary; bench/README.md).
    let filter = Targets::new()
        .with_default(level)
        .with_target("lambda_runtime", LevelFilter::DEBUG)
        .with_target("lambda_runtime_api_client", LevelFilter::DEBUG)
        .with_target("lambda_runtime::layers::panic", LevelFilter::OFF);
    let logs = tracing_subscriber::fmt().with_target(false).without_time();
    let json = std::env::var("AWS_LAMBDA_LOG_FORMAT")
        .is_ok_and(|format| format.eq_ignore_ascii_case("json"));
    // A second init (tests) fails harmlessly; there is nothing to do about it.
    let _ = if json {
        logs.json().finish().with(filter).try_init()
    } else {
        logs.finish().with(filter).try_init()
    };
}

fn log_misconfiguration(error: &LockError) {
    let answer = error.error_type();
    tracing::error!(error = %error, "misconfigured: every invocation will answer {answer}");
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
    let sdk = try_sdk_config().await.inspect_err(log_misconfiguration)?;
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
                budget(&event.context),
                ReconcileLimits::default(),
            ))
            .await?;
            metrics.reconciled(&report, now);
            Ok(SweepAnswer::Reconcile(report))
        }
        Payload::Json(json) => {
            // Per record: a batch cut short reports its unfinished records alone.
            let now = EpochMillis::now();
            let report = Box::pin(sweeper.sweep_within(json, now, budget(&event.context))).await?;
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
    let budget = budget(&event.context);
    Ok(locker
        .answer_within(payload, EpochMillis::now(), budget)
        .await?)
}

pub async fn handle_release(
    locker: &ConfiguredLocker,
    event: LambdaEvent<Payload>,
) -> Result<ReleaseResponse, Diagnostic> {
    let (locker, payload) = (configured(locker)?, lock_event(&event.payload)?);
    Ok(within_deadline(&event.context, locker.release(payload, EpochMillis::now())).await?)
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

    fn config(pairs: &[(&str, &str)]) -> Result<Config, LockError> {
        Config::from_lookup(|name| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        })
    }

    #[test]
    fn max_lease_is_a_number_or_a_sum_and_never_below_the_default() {
        let table = ("LOCK_TABLE_NAME", "locks");
        assert_eq!(config(&[table]).unwrap().max_lease, None);
        let max = |text: &str| config(&[table, ("MAX_LEASE_SECONDS", text)]);
        assert_eq!(max("3600").unwrap().max_lease.map(|m| m.get()), Some(3600));
        assert_eq!(
            max(" 3600 + 900+300 ").unwrap().max_lease.map(|m| m.get()),
            Some(4800)
        );
        for bad in [
            "",
            "1h",
            "3600+",
            "+900",
            "-1+5000",
            "0",
            "31536001",
            "9223372036854775807+1",
        ] {
            assert!(
                matches!(max(bad), Err(LockError::InvalidRequest { field, .. }) if field == "MAX_LEASE_SECONDS"),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn the_cap_also_bounds_the_default_lease() {
        // A cap (the template's MaxLeaseSeconds, or a sum of lease terms) can
        // be below DefaultLeaseSeconds' 900: the function must still start,
        // granting callers without leaseSeconds the cap, not refuse every
        // acquire as misconfigured.
        let table = ("LOCK_TABLE_NAME", "locks");
        let capped = config(&[table, ("MAX_LEASE_SECONDS", "60+30+0")]).unwrap();
        assert_eq!(capped.default_lease.get(), 90);
        assert_eq!(capped.max_lease.map(|m| m.get()), Some(90));
        let below = config(&[
            table,
            ("MAX_LEASE_SECONDS", "600"),
            ("DEFAULT_LEASE_SECONDS", "120"),
        ])
        .unwrap();
        assert_eq!(
            below.default_lease.get(),
            120,
            "a default under the cap is kept"
        );
    }

    #[test]
    fn the_store_is_required_and_lease_defaults_to_900() {
        assert!(
            matches!(config(&[]), Err(LockError::InvalidRequest { field, .. }) if field == "LOCK_STORE_URL")
        );
        let ok = config(&[("LOCK_TABLE_NAME", "locks")]).unwrap();
        assert_eq!(ok.default_lease.get(), 900);
        let set = config(&[
            ("LOCK_TABLE_NAME", "locks"),
            ("DEFAULT_LEASE_SECONDS", " 60 "),
        ])
        .unwrap();
        assert_eq!(
            set.default_lease.get(),
            60,
            "DEFAULT_LEASE_SECONDS is read, not assumed"
        );
    }

    #[test]
    fn default_lease_must_be_a_valid_lease() {
        for bad in ["0", "-5", "ten", "31536001"] {
            let result = config(&[("LOCK_TABLE_NAME", "locks"), ("DEFAULT_LEASE_SECONDS", bad)]);
            assert!(
                matches!(&result, Err(LockError::InvalidRequest { field, .. }) if field == "DEFAULT_LEASE_SECONDS"),
                "{bad}: {result:?}"
            );
        }
    }
}
