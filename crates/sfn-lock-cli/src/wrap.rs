//! `sfn-lock wrap DEFINITION.json`: prints DEFINITION with the lock around
//! its states, so that locking an existing state machine is one command
//! instead of the README's hand edit ("Adding the lock to your own state
//! machine").
//!
//! **What the output is.** statemachine/locked-workflow.asl.json
//! (`--mode wait`) or skip-if-running.asl.json (`--mode skip`), compiled in,
//! state for state: every lock state, Retry and Comment as reviewed, but
//! these:
//! - the example workload branch of `Run Workload Under Lock` becomes the
//!   user's `StartAt` and `States`, in their own order and layout; the
//!   states that route the sample Task's marker (Check Whether Workload
//!   Failed, Take Workload Error: whatever no path reaches once the Parallel
//!   goes on to Release Lock) are left out;
//! - the Parallel's Catch is chosen from the user's states (wrap_shape):
//!   every error holds the lock (the held path: `--workload-max-run-seconds`,
//!   plus 300 s when a Distributed Map runs Express child executions, which
//!   cannot be stopped) before the release if any state, at any depth, can
//!   run work side by side or
//!   outlive its state (a Map, a Parallel, any Task but a plain synchronous
//!   Lambda invocation); otherwise the errors after which the invocation may
//!   still run hold it and every other error releases at once;
//! - `TimeoutSeconds` (the files have none) is the user's own (required)
//!   plus the wait, the acquire's and the release's retries and the held
//!   path, and the lease is that plus the held path plus
//!   `--lease-margin-seconds`, a literal `leaseSeconds`, which a stack with
//!   MaxLeaseSeconds empty (the default) grants (wrap_timing);
//! - `Version` is kept; `Comment` is the user's, then what the wrap did
//!   (the Catch's shape and why, the timeout, the lease and what a stack's
//!   MaxLeaseSeconds must be to grant it, a warning against redrive), then
//!   the reviewed file's; stderr says the same three things;
//! - the lock name (`--lock-name`, or `--lock-name-path $.key`, read from
//!   `$$.Execution.Input` because the release states do not see the input),
//!   `--limit`, `--max-wait-seconds` and `--pass-lock-to-workload` are filled
//!   in; `${AcquireLockFunctionArn}` and `${ReleaseLockFunctionArn}` stay, for
//!   the user's DefinitionSubstitutions, as do the user's own placeholders;
//! - the lock states' service integrations (`arn:${Partition}:states:::...`
//!   in the files) are in `--partition` (default `aws`; `aws-cn`,
//!   `aws-us-gov`, ...), or keep a placeholder given as `--partition
//!   '${Partition}'` for the user's DefinitionSubstitutions (`!Ref
//!   AWS::Partition`). The user's own ARNs are theirs, left as written.
//!
//! **What the user's states see and give**: the locked workflow's contract.
//! Their input is the execution input unchanged (plus `sfnLock` with
//! `--pass-lock-to-workload`); the execution's output is their output. Any
//! error leaving their states (a Fail state's included) releases the lock
//! and fails the execution with that error and cause, after holding the
//! lock `--workload-max-run-seconds` when the work may still run (above). A
//! failed release after success still succeeds (`Succeed And Leave Lock To
//! Cleanup`). Errors no `Catch` can take (`States.DataLimitExceeded`,
//! `States.Runtime`) and stopped or timed-out executions leave the lock to
//! the sweep (list the state machine in `LockedStateMachineArns`) or, at
//! worst, the lease. In `--mode skip` a held lock ends the execution at once,
//! SUCCEEDED, with `{"skipped": true, "lock": {...}}`.
//!
//! **The user's Retry and Catch** stay as written, except on an error after
//! which the work may still be running: the names the reviewed file's
//! sample Task catches before its catch-all (States.Timeout,
//! States.HeartbeatTimeout, the Lambda service errors of an invoke: read
//! from the file, so the two cannot drift) and the catch-alls
//! that include them (States.ALL, States.TaskFailed); on a Map or Parallel,
//! any error; on a Task that waits for work outside it (`.sync`, `.sync:2`,
//! `.waitForTaskToken`, an activity), any error, because the same names
//! come from the call that starts the work and from the wait for it. A Retry on one starts a
//! second run beside the first (the file's own workload Task retries only
//! throttling for this reason), and the lock is released when the branch
//! ends; a Catch on one ends the error inside the branch, so the lock's Catch
//! never holds the lock for the running work. Such a definition is refused
//! (the first offender, by state name, depth first), at any depth: Parallel
//! branches, Map processors, the user's own Parallel or Map included. A
//! retrier with MaxAttempts 0 never retries and passes.
//! `--allow-unsafe-error-handling` wraps anyway, with one warning line per
//! offending retrier or catcher on stderr. A Map that tolerates failed items
//! (ToleratedFailureCount or ToleratedFailurePercentage above 0, or either's
//! `...Path` form) is refused, and let through by the same flag, for the same
//! reason: a failed item's work may run on after the Map succeeds, and a
//! success releases at once (wrap_tolerated). So is a Task that starts work
//! it does not wait for (an asynchronous Lambda invoke, a job started
//! without `.sync`, an AWS SDK `start...`/`run...`/`submit...`/
//! `create...Job` action), whose success would release the lock while that
//! work runs (wrap_unwaited).
//!
//! **Redrive.** Redrive re-runs only the states that did not succeed, so a
//! wrapped execution redriven after a stop, a timeout or an error no Catch
//! takes (States.Runtime, States.DataLimitExceeded) re-runs the user's states
//! without re-acquiring the lock (README, "Crash safety"; DESIGN.md,
//! "Redrive"). The output's Comment says not to redrive.
//!
//! **Refused** (status 1, nothing on stdout): a file that cannot be read, is
//! not JSON, or is no definition (not an object; StartAt or States missing or
//! wrong; unknown top-level fields); `QueryLanguage` other than JSONPath at
//! the top or in any state (the lock states are JSONPath, and the local
//! interpreter the output is tested in has no JSONata); a definition that
//! already has the lock states; a state, at any depth, named like a lock
//! state (names are unique across a whole state machine, branches
//! included); no top-level TimeoutSeconds, or one whose wrapped timeout or
//! lease would pass ASL's or acquire-lock's limit; a Retry or Catch on an
//! error after which the work may still be running, a Map that tolerates
//! failed items, or a Task that does not wait for the work it starts
//! (above). Everything else a definition holds may stay in a
//! Parallel branch: a branch is a whole state machine's `StartAt` and
//! `States` (ASL, Parallel state: "exactly like those in the top level"),
//! its transitions stay inside, and its Fail states fail the Parallel, which
//! the Catch re-raises. Bad flags are usage errors (status 2).

// In the order a wrap runs: the flags (here) and the reviewed file they
// fill in, the checks of the user's definition, then the output.
#[path = "wrap_build.rs"]
mod build;
#[path = "wrap_check.rs"]
mod check;
#[path = "wrap_comment.rs"]
mod comment;
#[path = "wrap_errors.rs"]
mod errors;
#[cfg(test)]
#[path = "wrap_fixtures.rs"]
mod fixtures;
#[path = "wrap_flags.rs"]
mod flags;
#[path = "wrap_pipeline.rs"]
mod pipeline;
#[path = "wrap_shape.rs"]
mod shape;
#[path = "wrap_states.rs"]
mod states;
#[path = "wrap_template.rs"]
mod template;
#[path = "wrap_text.rs"]
mod text;
#[path = "wrap_timing.rs"]
mod timing;
#[path = "wrap_tolerated.rs"]
mod tolerated;
#[path = "wrap_unwaited.rs"]
mod unwaited;

use std::io::Write;
use std::path::PathBuf;

use clap::{ArgGroup, Args};

use flags::{lock_name, lock_name_path, partition};

use pipeline::{wrap_text, Wrapped};
use template::{LockName, Mode, Settings};

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("lock").required(true).args(["lock_name", "lock_name_path"])))]
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
    /// The lock every execution takes ('${LockName}' leaves it to DefinitionSubstitutions).
    #[arg(long, value_name = "NAME", value_parser = lock_name)]
    lock_name: Option<String>,
    /// A lock per key: a JSONPath into the execution input, e.g. '$.customerId'.
    #[arg(long, value_name = "JSONPATH", value_parser = lock_name_path)]
    lock_name_path: Option<String>,
    /// How many executions may hold the lock at once (1: a mutex; up to 1000: a semaphore).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=1000))]
    limit: u16,
    /// wait: wait for the lock (locked-workflow.asl.json); skip: succeed at once as skipped
    /// while it is held (skip-if-running.asl.json).
    #[arg(long, value_enum, default_value_t = Mode::Wait)]
    mode: Mode,
    /// With --mode wait: how long to wait for the lock before failing with LockWaitTimeout;
    /// added to your TimeoutSeconds, so that your states keep their whole time after a wait
    /// (and the lease grows with it) [default: 3600].
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u32).range(0..=36000))]
    max_wait_seconds: Option<u32>,
    /// The longest any piece of your work (a Lambda invocation, a job, a worker, a child
    /// execution) runs on after its state stopped: for a Lambda function, its own Timeout. The
    /// lock is held that long after an error that may leave work running (300 s more if a
    /// Distributed Map runs Express child executions, which cannot be stopped), and it is added
    /// to your TimeoutSeconds and to the lease.
    #[arg(long, value_name = "SECONDS", default_value_t = 900,
          value_parser = clap::value_parser!(u32).range(30..=86400))]
    workload_max_run_seconds: u32,
    /// Added to the wrapped execution's TimeoutSeconds + --workload-max-run-seconds to make
    /// the lease.
    #[arg(long, value_name = "SECONDS", default_value_t = 300,
          value_parser = clap::value_parser!(u32).range(0..=86400))]
    lease_margin_seconds: u32,
    /// Give your states their lock (lockName, owner, fencingToken, expiresAt) as $.sfnLock
    /// in their input, which must then be a JSON object.
    #[arg(long)]
    pass_lock_to_workload: bool,
    /// Wrap even if your states Retry or Catch an error after which their work may still be
    /// running (States.Timeout, States.HeartbeatTimeout, a Lambda service error, States.ALL,
    /// States.TaskFailed; any error of a Map, a Parallel, a .sync, .sync:2 or
    /// .waitForTaskToken Task or an activity), a Map of yours tolerates failed items, or a Task
    /// starts work it does not wait for (e.g. because your states poll it to its end), which
    /// lets the lock go while that work runs on: one warning line each on stderr, and the
    /// mutual exclusion is yours to ensure.
    #[arg(long)]
    allow_unsafe_error_handling: bool,
    /// The partition the state machine runs in (aws, aws-cn, aws-us-gov, ...): the lock
    /// states' Resources become arn:PARTITION:states:::lambda:invoke. '${Partition}' (a
    /// placeholder) leaves it to your DefinitionSubstitutions (!Ref AWS::Partition).
    #[arg(long, value_name = "PARTITION", default_value = "aws", value_parser = partition)]
    partition: String,
    /// The definition to wrap: ASL JSON (JSONPath), with a top-level TimeoutSeconds.
    #[arg(value_name = "DEFINITION.json")]
    definition: PathBuf,
}

/// The default of `--max-wait-seconds`, the template's `MaxWaitSeconds`.
const DEFAULT_MAX_WAIT_SECONDS: u32 = 3600;

pub fn wrap(args: WrapArgs) -> u8 {
    let mode = args.mode;
    if mode == Mode::Skip && args.max_wait_seconds.is_some() {
        eprintln!("sfn-lock: --max-wait-seconds is for --mode wait: --mode skip never waits");
        return 2;
    }
    let lock_name = match (args.lock_name, args.lock_name_path) {
        (Some(name), _) => LockName::Fixed(name),
        (None, Some(path)) => LockName::InputPath(path),
        // clap's ArgGroup requires one of them.
        (None, None) => {
            eprintln!("sfn-lock: --lock-name or --lock-name-path is required");
            return 2;
        }
    };
    let settings = Settings {
        mode,
        lock_name,
        limit: args.limit,
        max_wait_seconds: args.max_wait_seconds.unwrap_or(DEFAULT_MAX_WAIT_SECONDS),
        workload_max_run_seconds: args.workload_max_run_seconds,
        lease_margin_seconds: args.lease_margin_seconds,
        pass_lock_to_workload: args.pass_lock_to_workload,
        partition: args.partition,
    };
    let allow_unsafe = args.allow_unsafe_error_handling;
    let shown = args.definition.display();
    let wrapped = match std::fs::read_to_string(&args.definition) {
        Err(error) => Err(format!("cannot read {shown}: {error}")),
        Ok(text) => {
            wrap_text(&text, &settings, allow_unsafe).map_err(|reason| format!("{shown}: {reason}"))
        }
    };
    let definition = match wrapped {
        Ok(Wrapped {
            definition,
            notes,
            warnings,
        }) => {
            for note in notes {
                eprintln!("sfn-lock: {shown}: {note}");
            }
            for warning in warnings {
                eprintln!("sfn-lock: warning: {shown}: {warning}");
            }
            definition
        }
        Err(message) => {
            eprintln!("sfn-lock: {message}");
            return 1;
        }
    };
    let mut stdout = std::io::stdout().lock();
    if let Err(error) = stdout
        .write_all(definition.as_bytes())
        .and_then(|()| stdout.flush())
    {
        eprintln!("sfn-lock: cannot write the definition: {error}");
        return 1;
    }
    0
}
