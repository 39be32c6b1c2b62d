//! The reviewed state machine a wrap starts from, and the settings (the
//! flags) that fill in its placeholders.
//!
//! The files are compiled in with `include_str!`, so that the lock states
//! `sfn-lock wrap` prints cannot drift from statemachine/*.asl.json.

use std::collections::BTreeSet;

use clap::ValueEnum;
use serde_json::{json, Value};

/// The state whose single branch runs the workload, in both definitions.
pub(crate) const WORKLOAD_STATE: &str = "Run Workload Under Lock";
/// The state that holds the lock until work that may still run has stopped.
pub(crate) const WAIT_STATE: &str = "Wait For Timed-Out Workload To Stop";

/// What an execution does while the lock is held (`--mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Mode {
    Wait,
    Skip,
}

impl Mode {
    /// The value of `--mode`, as the wrapped Comment repeats it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::Wait => "wait",
            Mode::Skip => "skip",
        }
    }

    pub(crate) fn file(self) -> &'static str {
        match self {
            Mode::Wait => "locked-workflow.asl.json",
            Mode::Skip => "skip-if-running.asl.json",
        }
    }

    fn template(self) -> &'static str {
        match self {
            Mode::Wait => include_str!("../../../statemachine/locked-workflow.asl.json"),
            Mode::Skip => include_str!("../../../statemachine/skip-if-running.asl.json"),
        }
    }
}

/// Which lock an execution takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum LockName {
    /// The same name for every execution.
    Fixed(String),
    /// A JSONPath into the execution input (`$.customerId`): a lock per key.
    InputPath(String),
}

impl LockName {
    /// The lock states' field: a fixed `lockName`, or `lockName.$` read from the
    /// context object's copy of the input, because the release states get the
    /// workload's error or output as their input, not the execution input.
    pub(crate) fn field(&self) -> (&'static str, String) {
        match self {
            LockName::Fixed(name) => ("lockName", name.clone()),
            LockName::InputPath(path) => (
                "lockName.$",
                format!("$$.Execution.Input{}", path.trim_start_matches('$')),
            ),
        }
    }

    pub(crate) fn describe(&self) -> String {
        match self {
            LockName::Fixed(name) => format!("the lock {}", json!(name)),
            LockName::InputPath(path) => format!("the lock named by {path} in the execution input"),
        }
    }
}

/// The values the placeholders get, besides the function ARNs (left for the
/// user's DefinitionSubstitutions) and the execution timeout (the user's).
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) mode: Mode,
    pub(crate) lock_name: LockName,
    pub(crate) limit: u16,
    pub(crate) max_wait_seconds: u32,
    pub(crate) workload_max_run_seconds: u32,
    pub(crate) lease_margin_seconds: u32,
    pub(crate) pass_lock_to_workload: bool,
    /// `${Partition}` of the service integrations: `aws`, `aws-cn`, ..., or a
    /// placeholder left for the user's DefinitionSubstitutions.
    pub(crate) partition: String,
}

impl Settings {
    /// The longest the execution waits for the lock, which its TimeoutSeconds
    /// adds to the user's: `--max-wait-seconds` in wait mode, 0 in skip mode.
    pub(crate) fn wait_seconds(&self) -> u64 {
        match self.mode {
            Mode::Wait => u64::from(self.max_wait_seconds),
            Mode::Skip => 0,
        }
    }

    /// What the lease adds to the user's TimeoutSeconds: the wait (the
    /// execution's TimeoutSeconds is the user's plus the wait), then
    /// `--workload-max-run-seconds` and `--lease-margin-seconds`.
    pub(crate) fn lease_extra(&self) -> u64 {
        self.wait_seconds()
            + u64::from(self.workload_max_run_seconds)
            + u64::from(self.lease_margin_seconds)
    }

    /// The flags `lease_extra` adds up, for a refusal to name.
    pub(crate) fn lease_extra_flags(&self) -> &'static str {
        match self.mode {
            Mode::Wait => {
                "--max-wait-seconds + --workload-max-run-seconds + --lease-margin-seconds"
            }
            Mode::Skip => "--workload-max-run-seconds + --lease-margin-seconds",
        }
    }
}

/// A reviewed definition with the settings filled in, as text (for its
/// order and layout) and parsed (for its meaning).
pub(crate) struct Template {
    pub(crate) text: String,
    pub(crate) value: Value,
}

impl Template {
    pub(crate) fn load(settings: &Settings, timeout_seconds: u64) -> Result<Template, String> {
        let substitutions = [
            ("Partition", settings.partition.clone()),
            ("ExecutionTimeoutSeconds", timeout_seconds.to_string()),
            (
                "WorkloadMaxRunSeconds",
                settings.workload_max_run_seconds.to_string(),
            ),
            (
                "LeaseMarginSeconds",
                settings.lease_margin_seconds.to_string(),
            ),
            ("MaxWaitSeconds", settings.max_wait_seconds.to_string()),
            ("LockLimit", settings.limit.to_string()),
            (
                "LockResultPath",
                if settings.pass_lock_to_workload {
                    r#""$.sfnLock""#
                } else {
                    "null"
                }
                .to_owned(),
            ),
            // The example branch's task timeout: the branch is replaced, but
            // the file must parse first.
            ("WorkloadTimeoutSeconds", "1".to_owned()),
        ];
        let mut text = settings.mode.template().to_owned();
        for (name, value) in &substitutions {
            text = text.replace(&format!("${{{name}}}"), value);
        }
        let value = serde_json::from_str(&text).map_err(|error| {
            format!(
                "{} does not parse once filled in: {error}",
                settings.mode.file()
            )
        })?;
        Ok(Template { text, value })
    }

    /// The names of the lock's states (the user's must differ).
    pub(crate) fn state_names(&self) -> BTreeSet<String> {
        self.value["States"]
            .as_object()
            .map(|states| states.keys().cloned().collect())
            .unwrap_or_default()
    }
}
