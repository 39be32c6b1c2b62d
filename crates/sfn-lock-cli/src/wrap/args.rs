//! `sfn-lock wrap`'s flags, each checked as it is parsed (flags.rs holds the
//! rules clap cannot say), and their defaults.

use std::path::PathBuf;

use clap::{ArgGroup, Args};

use sfn_lock::{Limit, LockName};

use super::flags::{limit, lock_name, lock_name_path, partition};
use super::template::{LockName as Lock, Mode};

#[derive(Args, Debug)]
// LOCK, or its old spelling --lock-name, or --lock-name-path: one of them.
// The two flags exclude each other here (the group); LOCK is told apart
// from DEFINITION.json by lock_and_definition(), since it is left out when a
// flag names the lock. (clap's allow_missing_positional would guess instead,
// and took `wrap LOCK --limit 2 DEF.json`'s LOCK for the definition.)
#[command(group(ArgGroup::new("lock_flag").args(["deprecated_lock_name", "lock_name_path"])))]
#[command(
    override_usage = "sfn-lock wrap [OPTIONS] <LOCK> <DEFINITION.json>\n       \
    sfn-lock wrap [OPTIONS] --lock-name-path <JSONPATH> <DEFINITION.json>"
)]
#[command(
    after_help = "Exit status: 0 with the definition on stdout, and on stderr three lines \
    the output's Comment repeats: which errors hold the lock and why (every error, if any state \
    of yours, at any depth, is a Map, a Parallel or a Task other than a plain synchronous Lambda \
    invocation: work that may run side by side or outlive its state), the TimeoutSeconds as its \
    sum, and the lease the acquires ask for (a stack with MaxLeaseSeconds set must allow it), \
    then one line per --allow-unsafe-error-handling warning; 1 if DEFINITION cannot be \
    read or wrapped (one line on stderr, nothing on stdout); 2 for a usage error. Refused \
    among others: a Retry or Catch of yours, at any depth, on an error after which the work \
    may still be running (States.Timeout, States.HeartbeatTimeout, Lambda.ServiceException, \
    Lambda.AWSLambdaException, Lambda.SdkClientException, \
    Lambda.ClientExecutionTimeoutException, States.ALL, States.TaskFailed): the lock's own \
    states handle those; any Retry or Catch on a Map or Parallel (the other items' or \
    branches' invocations run on after one failed), or on a .sync, .sync:2 or \
    .waitForTaskToken Task or an activity (its errors cannot tell a start that failed from \
    work that runs on); a Map that tolerates failed items (ToleratedFailureCount or \
    ToleratedFailurePercentage above 0, or their ...Path forms); and a Task that starts work \
    it does not wait for (a Lambda invoke with InvocationType Event or InvocationType.$; \
    states:startExecution, ecs:runTask, batch:submitJob, glue:startJobRun and the other \
    integrations with a .sync form, used without it; an aws-sdk: action named start..., \
    run..., submit..., create...Job or ...Async), which would release the lock on success \
    while that work runs.\n\n\
    Do not redrive a wrapped execution (the output's Comment says why): start a new one.\n\n\
    The output keeps ${AcquireLockFunctionArn} and ${ReleaseLockFunctionArn} for your \
    template's DefinitionSubstitutions: give them the stack outputs \
    AcquireLockFunctionVersionArn and ReleaseLockFunctionVersionArn (the published versions, \
    as the stack's own state machines call), and grant the state machine's role \
    lambda:InvokeFunction on AcquireLockFunctionArn:* and ReleaseLockFunctionArn:* (every \
    version: an execution started before an update calls its own). The lock \
    states' integrations are in --partition (aws unless you say otherwise); your own \
    states' ARNs are left as you wrote them."
)]
pub struct WrapArgs {
    /// The lock every execution takes ('${LockName}' leaves it to DefinitionSubstitutions),
    /// named as in run, status and release; left out with --lock-name-path.
    #[arg(value_name = "LOCK", required = true)]
    lock: Option<PathBuf>,
    /// Deprecated: LOCK's old spelling, hidden from --help and kept so that scripts
    /// written for it keep working (completion scripts still list it).
    #[arg(long = "lock-name", value_name = "NAME", value_parser = lock_name, hide = true)]
    pub(super) deprecated_lock_name: Option<LockName>,
    /// A lock per key, instead of LOCK: a JSONPath into the execution input, e.g.
    /// '$.customerId' (in a JSONata definition, read as $states.context.Execution.Input.customerId).
    #[arg(long, value_name = "JSONPATH", value_parser = lock_name_path)]
    pub(super) lock_name_path: Option<String>,
    /// How many executions may hold the lock at once (1: a mutex; up to 1000: a semaphore).
    #[arg(long, value_name = "N", default_value = "1", value_parser = limit)]
    pub(super) limit: Limit,
    /// wait: wait for the lock (locked-workflow.asl.json); skip: succeed at once as skipped
    /// while it is held (skip-if-running.asl.json).
    #[arg(long, value_enum, default_value_t = Mode::Wait)]
    pub(super) mode: Mode,
    /// With --mode wait: how long to wait for the lock before failing with LockWaitTimeout;
    /// added to your TimeoutSeconds, so that your states keep their whole time after a wait
    /// (and the lease grows with it) [default: 3600].
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u32).range(0..=36000))]
    pub(super) max_wait_seconds: Option<u32>,
    /// The longest any piece of your work (a Lambda invocation, a job, a worker, a child
    /// execution) runs on after its state stopped: for a Lambda function, its own Timeout. The
    /// lock is held that long after an error that may leave work running (300 s more if a
    /// Distributed Map runs Express child executions, which cannot be stopped), and it is added
    /// to your TimeoutSeconds and to the lease.
    #[arg(long, value_name = "SECONDS", default_value_t = 900,
          value_parser = clap::value_parser!(u32).range(30..=86400))]
    pub(super) workload_max_run_seconds: u32,
    /// Added to the wrapped execution's TimeoutSeconds + --workload-max-run-seconds to make
    /// the lease.
    #[arg(long, value_name = "SECONDS", default_value_t = 300,
          value_parser = clap::value_parser!(u32).range(0..=86400))]
    pub(super) lease_margin_seconds: u32,
    /// Give your states their lock (lockName, owner, fencingToken, expiresAt) as $.sfnLock
    /// in their input, which must then be a JSON object.
    #[arg(long)]
    pub(super) pass_lock_to_workload: bool,
    /// Wrap even if your states Retry or Catch an error after which their work may still be
    /// running (States.Timeout, States.HeartbeatTimeout, a Lambda service error, States.ALL,
    /// States.TaskFailed; any error of a Map, a Parallel, a .sync, .sync:2 or
    /// .waitForTaskToken Task or an activity), a Map of yours tolerates failed items, or a Task
    /// starts work it does not wait for (e.g. because your states poll it to its end), which
    /// lets the lock go while that work runs on: one warning line each on stderr, and the
    /// mutual exclusion is yours to ensure.
    #[arg(long)]
    pub(super) allow_unsafe_error_handling: bool,
    /// The partition the state machine runs in (aws, aws-cn, aws-us-gov, ...): the lock
    /// states' Resources become arn:PARTITION:states:::lambda:invoke. '${Partition}' (a
    /// placeholder) leaves it to your DefinitionSubstitutions (!Ref AWS::Partition).
    #[arg(long, value_name = "PARTITION", default_value = "aws", value_parser = partition)]
    pub(super) partition: String,
    /// The definition to wrap: ASL JSON, JSONPath or JSONata (the output keeps its language),
    /// with a top-level TimeoutSeconds.
    #[arg(value_name = "DEFINITION.json")]
    definition: Option<PathBuf>,
}

impl WrapArgs {
    /// The lock and the definition: `LOCK DEFINITION.json`, or
    /// `DEFINITION.json` alone after --lock-name-path (or --lock-name). A
    /// usage error otherwise, one line saying what to give.
    pub(super) fn lock_and_definition(&self) -> Result<(Lock, PathBuf), String> {
        let flag = match (&self.deprecated_lock_name, &self.lock_name_path) {
            (Some(name), _) => Some((Lock::Fixed(name.clone()), "--lock-name")),
            (None, Some(path)) => Some((Lock::InputPath(path.clone()), "--lock-name-path")),
            (None, None) => None,
        };
        match (&self.lock, &self.definition, flag) {
            (Some(lock), Some(definition), None) => {
                let text = lock.to_str().ok_or("a lock name is UTF-8 text")?;
                Ok((Lock::Fixed(lock_name(text)?), definition.clone()))
            }
            (Some(definition), None, Some((lock, _))) => Ok((lock, definition.clone())),
            (Some(_), Some(_), Some((_, flag))) => Err(format!(
                "LOCK cannot be used with {flag}: give the lock's name once"
            )),
            _ => Err("wrap needs LOCK, the lock's name, before DEFINITION.json \
                      (or --lock-name-path JSONPATH instead of LOCK)"
                .into()),
        }
    }
}

/// The default of `--max-wait-seconds`, the template's `MaxWaitSeconds`.
pub(super) const DEFAULT_MAX_WAIT_SECONDS: u32 = 3600;

#[cfg(test)]
mod tests {
    use clap::{Args, Command};
    use sfn_lock::MAX_LIMIT;

    use super::WrapArgs;

    /// The help states the library's bound, which parsing `--limit` applies.
    #[test]
    fn the_limit_help_says_the_librarys_bound() {
        let help = WrapArgs::augment_args(Command::new("wrap"))
            .render_long_help()
            .to_string();
        assert!(
            help.contains(&format!("up to {MAX_LIMIT}: a semaphore")),
            "{help}"
        );
    }
}
