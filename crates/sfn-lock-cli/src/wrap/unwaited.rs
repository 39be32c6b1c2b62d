//! Tasks that start work and return without waiting for it: an
//! asynchronous Lambda invoke, a job started without `.sync`, an AWS SDK
//! action that starts something. Their state succeeds once the work has
//! started, so on success the user's states end and the lock is released
//! at once (only errors take the held path) while the work runs on. Like
//! the unsafe Retry and Catch of errors.rs, each is refused in one line
//! naming the state, or, with --allow-unsafe-error-handling, wrapped with
//! one warning (for states that wait for the work themselves, a polling
//! loop, which wrap cannot tell from a Task that does not).
//!
//! Which Tasks: a Lambda invoke (`lambda:invoke` or `aws-sdk:lambda:invoke`)
//! with InvocationType Event, or `InvocationType.$` (chosen at run time,
//! so possibly Event); an optimized integration that has a `.sync` form
//! (SYNC_FORMS) used without `.sync`, `.sync:2` or `.waitForTaskToken`; and
//! an AWS SDK action (`aws-sdk:SERVICE:ACTION`, which has no `.sync`: "Run a
//! Job (.sync): Not supported" for AWS SDK integrations) named like one
//! that starts work: `start...` (but `sfn:startSyncExecution`, which
//! returns the execution's result), `run...`, `submit...`, `create...Job`,
//! or `...Async`, unless it waits for a task token. An AWS SDK action is
//! judged by its name: one that starts nothing but is named so is wrapped
//! with the flag.

use serde_json::{Map, Value};

use super::errors::Unsafe;
use super::shape::{arn_parts, is_partition};
use super::states::{invocation_type, Invocation};

/// The optimized integrations (`arn:PARTITION:states:::SERVICE:ACTION`)
/// that start work and have a Run a Job (`.sync`) form, which waits for it
/// (Step Functions developer guide, "Integrating optimized services": each
/// service's page lists its APIs and the patterns they support). APIs that
/// create or change a resource (an EMR or EKS cluster, an EMR Serverless
/// application) and have a `.sync` form are left out: what runs on that
/// resource is started by Tasks of their own, which this list covers.
pub(crate) const SYNC_FORMS: [&str; 20] = [
    "athena:startQueryExecution",
    "batch:submitJob",
    "bedrock:createModelCustomizationJob",
    "codebuild:retryBuildBatch",
    "codebuild:startBuild",
    "codebuild:startBuildBatch",
    "databrew:startJobRun",
    "ecs:runTask",
    "eks:runJob",
    "elasticmapreduce:addStep",
    "elasticmapreduce-containers:startJobRun",
    "emr-serverless:startJobRun",
    "glue:startJobRun",
    "mediaconvert:createJob",
    "sagemaker:createHyperParameterTuningJob",
    "sagemaker:createLabelingJob",
    "sagemaker:createProcessingJob",
    "sagemaker:createTrainingJob",
    "sagemaker:createTransformJob",
    "states:startExecution",
];

/// What to do about an asynchronous Lambda invoke instead.
const INVOKE_REMEDY: &str = "invoke it synchronously (InvocationType RequestResponse, the \
    default), or use lambda:invoke.waitForTaskToken and have the function send the token back \
    when its work is done";
/// What to do about an optimized integration used without `.sync` instead.
const SYNC_REMEDY: &str = "use its .sync form (or .sync:2, or .waitForTaskToken where the \
    service offers it), which waits until the work has ended";
/// What to do about an AWS SDK action that starts work instead.
const SDK_REMEDY: &str = "use the service's optimized integration with .sync if it has one \
    (arn:aws:states:::SERVICE:ACTION.sync), or .waitForTaskToken with the work sending the \
    token back when it is done";

/// A service integration named by a Task's Resource.
struct Integration<'r> {
    /// `aws-sdk:SERVICE:ACTION` rather than an optimized `SERVICE:ACTION`.
    sdk: bool,
    service: &'r str,
    action: &'r str,
    /// `.sync`, `.sync:2`, `.waitForTaskToken`, or none.
    pattern: Option<&'r str>,
}

/// The integration `resource` names, if it is `arn:PARTITION:states:::...`.
fn integration(resource: &str) -> Option<Integration<'_>> {
    let parts = arn_parts(resource);
    let is_integration = parts.len() >= 7
        && parts[0] == "arn"
        && is_partition(parts[1])
        && parts[2] == "states"
        && parts[3].is_empty()
        && parts[4].is_empty();
    if !is_integration {
        return None;
    }
    // What follows `arn:PARTITION:states:::`, in `resource` itself.
    let prefix: usize = parts[..5].iter().map(|part| part.len() + 1).sum();
    let rest = resource.get(prefix..)?;
    let (sdk, rest) = match rest.strip_prefix("aws-sdk:") {
        Some(rest) => (true, rest),
        None => (false, rest),
    };
    let (service, call) = rest.split_once(':')?;
    let (action, pattern) = match call.find('.') {
        Some(dot) => (&call[..dot], Some(&call[dot..])),
        None => (call, None),
    };
    Some(Integration {
        sdk,
        service,
        action,
        pattern,
    })
}

/// A Task of `state` that starts work it does not wait for, if it is one.
pub(crate) fn unwaited_work(name: &str, state: &Map<String, Value>) -> Option<Unsafe> {
    if state.get("Type").and_then(Value::as_str) != Some("Task") {
        return None;
    }
    let resource = state.get("Resource").and_then(Value::as_str)?;
    let call = integration(resource)?;
    // A task token is sent back when the work is done: it waits.
    if call.pattern.is_some() {
        return None;
    }
    let (what, remedy) = if call.service == "lambda" && call.action == "invoke" {
        let invocation = match invocation_type(state) {
            Invocation::AtRunTime => "a Lambda invoke whose InvocationType is chosen at run time \
                 (InvocationType.$, or a JSONata expression), which may be Event: the function \
                 runs on after its state ended"
                .to_owned(),
            Invocation::Default | Invocation::Written("RequestResponse" | "DryRun") => return None,
            Invocation::Written(other) => format!(
                "an asynchronous Lambda invoke (InvocationType {other}), whose state ends once \
                 the function is queued, while it runs on"
            ),
        };
        (invocation, INVOKE_REMEDY)
    } else if !call.sdk
        && SYNC_FORMS.contains(&format!("{}:{}", call.service, call.action).as_str())
    {
        (
            format!(
                "a Task on \"{resource}\", which starts {}:{} without .sync: its state ends once \
                 the work has started",
                call.service, call.action
            ),
            SYNC_REMEDY,
        )
    } else if call.sdk && starts_work(call.service, call.action) {
        (
            format!(
                "a Task on \"{resource}\", an AWS SDK action that starts work and returns (AWS \
                 SDK integrations have no .sync): its state ends once the work has started"
            ),
            SDK_REMEDY,
        )
    } else {
        return None;
    };
    Some(Unsafe {
        description: format!(
            "state \"{name}\" is {what}: when your states then succeed, the lock would be \
             released while that work runs on"
        ),
        remedy,
    })
}

/// Whether an AWS SDK action is named like one that starts work.
fn starts_work(service: &str, action: &str) -> bool {
    if service == "sfn" && action == "startSyncExecution" {
        return false;
    }
    action.starts_with("start")
        || action.starts_with("run")
        || action.starts_with("submit")
        || (action.starts_with("create") && action.ends_with("Job"))
        || action.ends_with("Async")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_integration_out_of_the_resource() {
        let call = integration("arn:${AWS::Partition}:states:::states:startExecution.sync:2")
            .expect("an integration");
        assert!(!call.sdk);
        assert_eq!(
            (call.service, call.action, call.pattern),
            ("states", "startExecution", Some(".sync:2"))
        );
        let call = integration("arn:aws:states:::aws-sdk:sfn:startExecution").expect("one");
        assert!(call.sdk);
        assert_eq!(
            (call.service, call.action, call.pattern),
            ("sfn", "startExecution", None)
        );
        for other in [
            "arn:aws:lambda:us-east-1:123456789012:function:f",
            "arn:aws:states:us-east-1:123456789012:activity:a",
            "${Resource}",
        ] {
            assert!(integration(other).is_none(), "{other}");
        }
    }

    #[test]
    fn sdk_actions_that_start_work() {
        for (service, action) in [
            ("sfn", "startExecution"),
            ("ecs", "runTask"),
            ("batch", "submitJob"),
            ("iot", "createJob"),
            ("lambda", "invokeAsync"),
            ("sagemakerruntime", "invokeEndpointAsync"),
        ] {
            assert!(starts_work(service, action), "{service}:{action}");
        }
        for (service, action) in [
            ("sfn", "startSyncExecution"),
            ("dynamodb", "putItem"),
            ("s3", "getObject"),
            ("sagemaker", "createModel"),
        ] {
            assert!(!starts_work(service, action), "{service}:{action}");
        }
    }
}
