//! The wrapped definition's Comment: the user's own, then what the wrap did
//! (its timeout and a warning against redrive), then the reviewed file's
//! (which explains the lock states).

use serde_json::Value;

use super::build::UserParts;
use super::template::{Mode, Settings, WORKLOAD_STATE};

/// The Comment for the user's parts wrapped in `template` (the reviewed
/// file, parsed) with `settings`.
pub(crate) fn comment(settings: &Settings, user: &UserParts, template: &Value) -> String {
    let mode = settings.mode.name();
    let timeout = match settings.mode {
        Mode::Wait => format!(
            "TimeoutSeconds is this definition's own {} plus the {} s it may wait for the lock \
             (--max-wait-seconds), so that its states keep their whole time after a wait.",
            user.timeout_seconds,
            settings.wait_seconds()
        ),
        Mode::Skip => "TimeoutSeconds is this definition's own.".to_owned(),
    };
    // acquire-lock refuses a lease above its MAX_LEASE_SECONDS (the stack's
    // MaxLeaseSeconds, by default the lease of the stack's own state machines).
    let lease = format!(
        "Its acquires ask for a lease of {} s: the acquire-lock it calls must allow that \
         (the stack's MaxLeaseSeconds).",
        user.timeout_seconds + settings.lease_extra()
    );
    let wrap = format!(
        "[sfn-lock wrap --mode {mode}: this definition's own states run as the one branch of \
         \"{WORKLOAD_STATE}\" while the execution holds {} (limit {}); every other state is \
         sfn-lock's statemachine/{}, explained below. {timeout} {lease} {REDRIVE}]",
        settings.lock_name.describe(),
        settings.limit,
        settings.mode.file(),
    );
    let reviewed = template["Comment"].as_str().unwrap_or_default();
    match user.comment {
        Some(user) if !user.is_empty() => format!("{user} {wrap} {reviewed}"),
        _ => format!("{wrap} {reviewed}"),
    }
}

/// The wrapped definition's warning against redrive (README, "Crash safety";
/// DESIGN.md, "Redrive").
const REDRIVE: &str = "Do not redrive an execution of this state machine: redrive re-runs only \
    the states that did not succeed, so after a stop, a timeout or an error no Catch takes \
    (States.Runtime, States.DataLimitExceeded) these states would run again without taking the \
    lock again (Acquire Lock had succeeded), beside whichever execution holds it by then; start \
    a new execution instead, which takes the lock.";
