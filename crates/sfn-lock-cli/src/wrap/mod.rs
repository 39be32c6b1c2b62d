//! `sfn-lock wrap LOCK DEFINITION.json`: prints DEFINITION with the lock around
//! its states, so that locking an existing state machine is one command
//! instead of the hand edit of docs/modes.md ("Recipe: adding the lock to
//! your own state machine").
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
//! - the Parallel's Catch is chosen from the user's states (shape.rs):
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
//!   MaxLeaseSeconds empty (the default) grants (timing.rs);
//! - `Version` is kept; `Comment` is the user's, then what the wrap did
//!   (the Catch's shape and why, the timeout, the lease and what a stack's
//!   MaxLeaseSeconds must be to grant it, a warning against redrive), then
//!   the reviewed file's; stderr says the same three things;
//! - the lock name (LOCK, or `--lock-name-path $.key`, read from
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
//! success releases at once (tolerated.rs). So is a Task that starts work
//! it does not wait for (an asynchronous Lambda invoke, a job started
//! without `.sync`, an AWS SDK `start...`/`run...`/`submit...`/
//! `create...Job` action), whose success would release the lock while that
//! work runs (unwaited.rs).
//!
//! **Redrive.** Redrive re-runs only the states that did not succeed, so a
//! wrapped execution redriven after a stop, a timeout or an error no Catch
//! takes (States.Runtime, States.DataLimitExceeded) re-runs the user's states
//! without re-acquiring the lock (docs/failures.md, "Crash safety"; DESIGN.md,
//! "Redrive"). The output's Comment says not to redrive.
//!
//! **Refused** (status 1, nothing on stdout): a file that cannot be read, is
//! not JSON, or is no definition (not an object; StartAt or States missing or
//! wrong; unknown top-level fields); a `QueryLanguage` ASL does not know, or
//! a JSONPath state inside a JSONata state machine (ASL refuses it; a
//! JSONata definition is wrapped in statemachine/jsonata/'s lock states, a
//! JSONPath one, its JSONata states included, in statemachine/'s); a
//! `--lock-name-path` with no plain JSONata form, for a JSONata definition
//! (jsonata_path.rs), or a fixed name written as a JSONata expression; a
//! variable of the user's whose name starts with `sfnLock` (the lock
//! states' own); a definition that
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

// A wrap runs: the flags (args.rs, flags.rs) fill in the reviewed file
// (template.rs), the user's definition is checked (check.rs, with states.rs
// to walk it and shape.rs, errors.rs, tolerated.rs, unwaited.rs, timing.rs
// for what it may do), then the output is built (build.rs, comment.rs, on
// text.rs's byte ranges); pipeline.rs runs those steps in that order.
mod args;
mod build;
mod check;
mod comment;
mod errors;
#[cfg(test)]
mod fixtures;
mod flags;
mod jsonata_path;
mod pipeline;
mod shape;
mod states;
mod template;
mod text;
mod timing;
mod tolerated;
mod unwaited;

use std::io::Write;

use args::DEFAULT_MAX_WAIT_SECONDS;
use pipeline::{wrap_text, Wrapped};
use template::{Flavour, Mode, Settings};

pub use args::WrapArgs;

pub fn wrap(args: WrapArgs) -> u8 {
    let mode = args.mode;
    if mode == Mode::Skip && args.max_wait_seconds.is_some() {
        eprintln!("sfn-lock: --max-wait-seconds is for --mode wait: --mode skip never waits");
        return 2;
    }
    let (lock_name, definition) = match args.lock_and_definition() {
        Ok(resolved) => resolved,
        Err(usage) => {
            eprintln!("sfn-lock: {usage}");
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
        // Read from the definition by the wrap (pipeline.rs).
        flavour: Flavour::JsonPath,
    };
    let allow_unsafe = args.allow_unsafe_error_handling;
    let shown = definition.display();
    let wrapped = match std::fs::read_to_string(&definition) {
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
