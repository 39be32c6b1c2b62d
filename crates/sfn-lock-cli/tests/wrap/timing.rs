//! The wrapped execution's TimeoutSeconds and lease: a wait that runs out
//! ends in LockWaitTimeout, an execution admitted at the last moment keeps
//! the user's whole TimeoutSeconds and then the held path and the release,
//! and a default-flag lease is one acquire-lock grants on a default stack.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use sfn_lock::lambda::Config;
use sfn_lock::{DynamoStore, EpochMillis, LockError, Locker};

use super::{stdout_json, wrap_edited};

/// Lambda's Init phase, up to 10 s before the handler's own Timeout starts.
const INIT_SECONDS: u64 = 10;

/// The `Timeout:` of `function` in template.yaml, the stack the output's
/// placeholders name: how long one of its invocations may take.
fn function_timeout(function: &str) -> u64 {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../template.yaml");
    let template = std::fs::read_to_string(path).expect("template.yaml is readable");
    let section = template
        .split(&format!("\n  {function}:\n"))
        .nth(1)
        .expect("the function is in template.yaml");
    // Up to the next resource, at the same indentation as the function.
    let timeout = section
        .lines()
        .take_while(|line| !line.starts_with("  ") || line.starts_with("   "))
        .find_map(|line| line.strip_prefix("      Timeout: "))
        .expect("the function has a Timeout");
    timeout.parse::<u64>().expect("a number") + INIT_SECONDS
}

/// Each delay a retrier waits, at most (full jitter waits up to it).
fn delays(retrier: &Value) -> Vec<u64> {
    let attempts = retrier["MaxAttempts"].as_u64().unwrap_or(3);
    let interval = retrier["IntervalSeconds"].as_f64().unwrap_or(1.0);
    let rate = retrier["BackoffRate"].as_f64().unwrap_or(2.0);
    let cap = retrier["MaxDelaySeconds"].as_f64().unwrap_or(f64::MAX);
    (0..attempts)
        .map(|attempt| (interval * rate.powi(attempt as i32)).min(cap).ceil() as u64)
        .collect()
}

/// The latest the acquire ends, after `wait` (0 when it does not wait), in
/// the worst case: an attempt in flight at the bound returns LockUnavailable,
/// the longest backoff, then every store-error retry fails at its longest.
fn latest_grant(acquire: &Value, wait: u64, invocation: u64) -> u64 {
    let mut at = wait;
    for retrier in acquire["Retry"].as_array().expect("retriers") {
        if retrier["ErrorEquals"]
            .as_array()
            .expect("errors")
            .contains(&json!("LockUnavailable"))
        {
            at += invocation + retrier["MaxDelaySeconds"].as_u64().expect("a cap");
        } else {
            at += delays(retrier)
                .iter()
                .map(|delay| invocation + delay)
                .sum::<u64>();
        }
    }
    at + invocation
}

/// The longest a release takes, retries included.
fn longest_release(release: &Value, invocation: u64) -> u64 {
    let retriers = release["Retry"].as_array().expect("retriers");
    let retries: u64 = retriers
        .iter()
        .flat_map(delays)
        .map(|delay| delay + invocation)
        .sum();
    invocation + retries
}

#[test]
fn an_execution_admitted_last_keeps_the_users_whole_timeout() {
    let acquire_invocation = function_timeout("AcquireLockFunction");
    let release_invocation = function_timeout("ReleaseLockFunction");
    for (args, wait) in [
        (vec![], 3600),
        (vec!["--max-wait-seconds", "0"], 0),
        (
            vec![
                "--max-wait-seconds",
                "36000",
                "--workload-max-run-seconds",
                "30",
            ],
            36000,
        ),
        (vec!["--mode", "skip"], 0),
    ] {
        let user = 5400;
        let out = wrap_edited(
            |definition| definition["TimeoutSeconds"] = json!(user),
            &args,
        );
        let wrapped = stdout_json(&out);
        let states = &wrapped["States"];
        let timeout = wrapped["TimeoutSeconds"]
            .as_u64()
            .expect("a TimeoutSeconds");
        let held = states["Wait For Workload To Stop"]["Seconds"]
            .as_u64()
            .expect("held");
        let grant = latest_grant(&states["Acquire Lock"], wait, acquire_invocation);
        let release = ["Release Lock", "Release Lock After Failure"]
            .map(|name| longest_release(&states[name], release_invocation))
            .into_iter()
            .max()
            .unwrap_or_default();
        // The wait's own end (LockWaitTimeout) comes before the timeout, and
        // the user's states, the held path and the release fit after the
        // latest grant.
        assert!(grant < timeout, "{args:?}: {grant} < {timeout}");
        assert!(
            grant + user + held + release <= timeout,
            "{args:?}: {grant} + {user} + {held} + {release} <= {timeout}"
        );
        let lease = states["Acquire Lock"]["Parameters"]["Payload"]["leaseSeconds"].as_u64();
        assert_eq!(lease, Some(timeout + held + 300), "{args:?}");
    }
}

/// The output's Acquire Lock Payload as Step Functions sends it.
fn acquire_event(wrapped: &Value) -> Value {
    let mut event = wrapped["States"]["Acquire Lock"]["Parameters"]["Payload"].clone();
    let fields = event.as_object_mut().expect("a Payload object");
    for (path, value) in [
        (
            "owner.$",
            "arn:aws:states:us-east-1:123456789012:execution:wrapped:run-1",
        ),
        ("waitStartedAt.$", "2026-12-03T10:00:00Z"),
    ] {
        assert!(fields.remove(path).is_some(), "{path}");
        fields.insert(path.trim_end_matches(".$").into(), json!(value));
    }
    assert!(fields.keys().all(|key| !key.ends_with(".$")), "{fields:?}");
    event
}

/// What acquire-lock, configured with `max_lease` (MAX_LEASE_SECONDS), says
/// to `event` before its store answers: Ok if it is past the request's
/// checks (the store here is unreachable), else the refusal.
fn acquire_lock_checks(event: &Value, max_lease: Option<String>) -> Result<(), LockError> {
    let config = Config::from_lookup(|name| match name {
        "LOCK_TABLE_NAME" => Some("locks".into()),
        "MAX_LEASE_SECONDS" => max_lease.clone(),
        _ => None,
    })?;
    let client = aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::Config::builder()
            .behavior_version_latest()
            .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
            .endpoint_url("http://127.0.0.1:9")
            .build(),
    );
    let locker = Locker::new(DynamoStore::new(client, "locks"), config.default_lease)
        .with_max_lease(config.max_lease);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let budget = Some(Duration::from_millis(500));
    match runtime.block_on(locker.acquire_within(event, EpochMillis::now(), budget)) {
        Err(refused @ LockError::InvalidRequest { .. }) => Err(refused),
        // The store's error: the request passed every check.
        Ok(_) | Err(_) => Ok(()),
    }
}

#[test]
fn a_default_flag_lease_is_granted_by_a_default_stack() {
    let out = wrap_edited(|definition| definition["TimeoutSeconds"] = json!(5400), &[]);
    let wrapped = stdout_json(&out);
    let event = acquire_event(&wrapped);
    let lease = event["leaseSeconds"].as_u64().expect("a literal lease");
    // MaxLeaseSeconds empty: no MAX_LEASE_SECONDS.
    let granted = acquire_lock_checks(&event, None);
    assert!(granted.is_ok(), "{lease}: {granted:?}");
    // What wrap tells a stack with MaxLeaseSeconds set is exact.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said = format!(
        "a stack with MaxLeaseSeconds empty (the default) accepts it; a stack with \
         MaxLeaseSeconds set needs MaxLeaseSeconds >= {lease}"
    );
    assert!(stderr.contains(&said), "{said:?} in {stderr}");
    assert!(acquire_lock_checks(&event, Some(lease.to_string())).is_ok());
    let below = acquire_lock_checks(&event, Some((lease - 1).to_string()));
    assert!(
        matches!(&below, Err(LockError::InvalidRequest { field, .. }) if field == "leaseSeconds"),
        "{below:?}"
    );
}

/// The sample with a Distributed Map of `execution_type` child executions
/// nested in a Parallel branch.
fn with_distributed_map(execution_type: &'static str) -> impl FnOnce(&mut Value) {
    move |definition| {
        let map = json!({
            "Type": "Map",
            "ItemsPath": "$.items",
            "ItemProcessor": {
                "ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": execution_type},
                "StartAt": "Ship Item",
                "States": {"Ship Item": {
                    "Type": "Task",
                    "Resource": "arn:aws:states:::lambda:invoke",
                    "Parameters": {"FunctionName": "${ShipFunctionArn}", "Payload.$": "$"},
                    "TimeoutSeconds": 5,
                    "End": true
                }}
            },
            "End": true
        });
        definition["States"]["Summarize"] = json!({
            "Type": "Parallel",
            "Branches": [{"StartAt": "Ship All", "States": {"Ship All": map}}],
            "Next": "Done"
        });
    }
}

/// The held Wait's Seconds, the TimeoutSeconds and the lease of a wrap.
fn numbers(wrapped: &Value) -> (u64, u64, u64) {
    let states = &wrapped["States"];
    (
        states["Wait For Workload To Stop"]["Seconds"]
            .as_u64()
            .expect("held"),
        wrapped["TimeoutSeconds"]
            .as_u64()
            .expect("a TimeoutSeconds"),
        states["Acquire Lock"]["Parameters"]["Payload"]["leaseSeconds"]
            .as_u64()
            .expect("a lease"),
    )
}

#[test]
fn express_child_executions_of_a_distributed_map_are_held_300_s_longer() {
    let plain = stdout_json(&wrap_edited(|_| {}, &[]));
    let standard = stdout_json(&wrap_edited(with_distributed_map("STANDARD"), &[]));
    assert_eq!(numbers(&standard), numbers(&plain), "STANDARD: unchanged");
    let (held, timeout, lease) = numbers(&plain);
    assert_eq!(held, 900);

    let out = wrap_edited(with_distributed_map("EXPRESS"), &[]);
    let express = stdout_json(&out);
    // The held path, the timeout that counts it and the lease that counts
    // it twice (in the timeout and after it).
    assert_eq!(
        numbers(&express),
        (held + 300, timeout + 300, lease + 600),
        "EXPRESS"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said = "1200 s (--workload-max-run-seconds 900 + 300 s because the Express child \
                executions of Distributed Map \"Ship All\" cannot be stopped and run up to 300 s)";
    assert!(stderr.contains(said), "{said:?} in {stderr}");
    let wait = express["States"]["Wait For Workload To Stop"]["Comment"]
        .as_str()
        .expect("a Comment");
    assert!(wait.contains(said), "{said:?} in {wait}");
}

#[test]
fn help_says_what_workload_max_run_seconds_bounds() {
    let out = super::wrap(&["--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    for expected in [
        "The longest any piece of your work (a Lambda invocation, a job, a worker, a child \
         execution) runs on after its state stopped",
        "Express child executions",
    ] {
        assert!(help.contains(expected), "{expected:?} in {help}");
    }
}
