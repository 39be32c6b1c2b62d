//! The wrapped definition's Comment: the user's own, then what the wrap did
//! (which errors hold the lock, the timeout, the lease, a warning against
//! redrive), then the reviewed file's (which explains the lock states),
//! introduced with where it does not apply to the output.

use serde_json::Value;

use super::build::UserParts;
use super::template::{Settings, WORKLOAD_STATE};

/// The Comment for the user's parts wrapped in `template` (the reviewed
/// file, parsed) with `settings`, without the file's states `left_out`.
pub(crate) fn comment(
    settings: &Settings,
    user: &UserParts,
    template: &Value,
    left_out: &[String],
) -> String {
    let wrap = format!(
        "[sfn-lock wrap --mode {mode}: this definition's own states run as the one branch of \
         \"{WORKLOAD_STATE}\" while the execution holds {lock} (limit {limit}); every other state \
         is sfn-lock's statemachine/{file}, explained below. {shape} {timeout} {lease} \
         {REDRIVE}]",
        mode = settings.mode.name(),
        lock = settings.lock_name.describe(),
        limit = settings.limit.get(),
        file = settings.file(),
        shape = user.shape.describe(&user.timing.bounds.describe_held()),
        timeout = user.timing.describe_timeout(),
        lease = user.timing.describe_lease(),
    );
    // The file's Comment is written for its sample Task, its marker states
    // and its own bounds: say where the output differs rather than drop it.
    let reviewed = format!(
        "[statemachine/{}'s own Comment, written for its sample workload Task: here your \
         states replace it, the states that route its marker ({}) are left out, and the \
         TimeoutSeconds and lease above replace the bounds it derives from \
         WorkloadTimeoutSeconds.] {}",
        settings.file(),
        left_out.join(", "),
        template["Comment"].as_str().unwrap_or_default()
    );
    match user.comment {
        Some(user) if !user.is_empty() => format!("{user} {wrap} {reviewed}"),
        _ => format!("{wrap} {reviewed}"),
    }
}

/// The wrapped definition's warning against redrive (docs/failures.md, "Crash safety";
/// DESIGN.md, "Redrive").
const REDRIVE: &str = "Do not redrive an execution of this state machine: redrive re-runs only \
    the states that did not succeed, so after a stop, a timeout or an error no Catch takes \
    (States.Runtime, States.DataLimitExceeded) these states would run again without taking the \
    lock again (Acquire Lock had succeeded), beside whichever execution holds it by then; start \
    a new execution instead, which takes the lock.";
