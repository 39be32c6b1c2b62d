//! The reviewed state machine a wrap starts from, and the settings (the
//! flags) that fill in its placeholders.
//!
//! The files are compiled in with `include_str!`, so that the lock states
//! `sfn-lock wrap` prints cannot drift from statemachine/*.asl.json.

use std::collections::BTreeSet;

use clap::ValueEnum;
use serde_json::{json, Value};
use sfn_lock::Limit;

use super::jsonata_path::jsonata_steps;
use super::states::unreachable;

/// The state whose single branch runs the workload, in both definitions.
pub(crate) const WORKLOAD_STATE: &str = "Run Workload Under Lock";
/// The state that holds the lock until work that may still run has stopped.
pub(crate) const WAIT_STATE: &str = "Wait For Workload To Stop";
/// The release after success, where the Parallel goes once the markers are gone.
pub(crate) const RELEASE_STATE: &str = "Release Lock";
/// The release after an error: where an error that proves the work ended goes.
pub(crate) const RELEASE_AFTER_FAILURE_STATE: &str = "Release Lock After Failure";
/// The sample Task in the branch: the errors after which its invocation
/// may still run are read from its Catch (errors.rs).
pub(crate) const SAMPLE_TASK: &str = "Run Workload";
/// The lease as the files compute it from their parameters. A wrap asks for
/// its own lease (timing.rs), a literal in its place; the text must be
/// found once, so that a changed file fails the wrap instead of keeping a
/// lease computed from the sample's bounds.
const LEASE_EXPRESSION: &str = r#""leaseSeconds.$": "States.MathAdd(States.MathAdd(${WorkloadTimeoutSeconds}, ${WorkloadMaxRunSeconds}), ${LeaseMarginSeconds})""#;
/// The same in the JSONata files.
const LEASE_EXPRESSION_JSONATA: &str = r#""leaseSeconds": "{% ${WorkloadTimeoutSeconds} + ${WorkloadMaxRunSeconds} + ${LeaseMarginSeconds} %}""#;

/// The query language of the user's definition, which the output keeps: a
/// state machine whose top level is JSONata cannot hold JSONPath states, so
/// its lock states come from statemachine/jsonata/ (the same states, errors
/// and guarantees; tests/template/asl_flavours.py keeps the two equal).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Flavour {
    #[default]
    JsonPath,
    Jsonata,
}

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

    pub(crate) fn file(self, flavour: Flavour) -> &'static str {
        match (self, flavour) {
            (Mode::Wait, Flavour::JsonPath) => "locked-workflow.asl.json",
            (Mode::Skip, Flavour::JsonPath) => "skip-if-running.asl.json",
            (Mode::Wait, Flavour::Jsonata) => "jsonata/locked-workflow.asl.json",
            (Mode::Skip, Flavour::Jsonata) => "jsonata/skip-if-running.asl.json",
        }
    }

    // From the crate's root, so that the path does not depend on where in
    // src/ this file sits.
    fn template(self, flavour: Flavour) -> &'static str {
        macro_rules! reviewed {
            ($file:literal) => {
                include_str!(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/../../statemachine/",
                    $file
                ))
            };
        }
        match (self, flavour) {
            (Mode::Wait, Flavour::JsonPath) => reviewed!("locked-workflow.asl.json"),
            (Mode::Skip, Flavour::JsonPath) => reviewed!("skip-if-running.asl.json"),
            (Mode::Wait, Flavour::Jsonata) => reviewed!("jsonata/locked-workflow.asl.json"),
            (Mode::Skip, Flavour::Jsonata) => reviewed!("jsonata/skip-if-running.asl.json"),
        }
    }
}

/// Which lock an execution takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum LockName {
    /// The same name for every execution.
    Fixed(sfn_lock::LockName),
    /// A JSONPath into the execution input (`$.customerId`): a lock per key.
    InputPath(String),
}

impl LockName {
    /// The lock states' field: a fixed `lockName`, or `lockName.$` read from the
    /// context object's copy of the input, because the release states get the
    /// workload's error or output as their input, not the execution input.
    pub(crate) fn field(&self, flavour: Flavour) -> Result<(&'static str, String), String> {
        Ok(match (self, flavour) {
            // In a JSONata state a string written as {% ... %} is an
            // expression: a fixed name so written would name another lock.
            (LockName::Fixed(name), Flavour::Jsonata)
                if name.as_str().trim_start().starts_with("{%") =>
            {
                return Err(format!(
                    "the lock name {} would be a JSONata expression in a JSONata definition, \
                     not a name: choose another, or --lock-name-path for a lock per key",
                    json!(name.as_str())
                ))
            }
            (LockName::Fixed(name), _) => ("lockName", name.as_str().to_owned()),
            (LockName::InputPath(path), Flavour::JsonPath) => (
                "lockName.$",
                format!("$$.Execution.Input{}", path.trim_start_matches('$')),
            ),
            (LockName::InputPath(path), Flavour::Jsonata) => (
                "lockName",
                format!(
                    "{{% $states.context.Execution.Input{} %}}",
                    jsonata_steps(path)?
                ),
            ),
        })
    }

    pub(crate) fn describe(&self) -> String {
        match self {
            LockName::Fixed(name) => format!("the lock {}", json!(name.as_str())),
            LockName::InputPath(path) => format!("the lock named by {path} in the execution input"),
        }
    }
}

/// The values the placeholders get, besides the function ARNs (left for the
/// user's DefinitionSubstitutions).
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) mode: Mode,
    pub(crate) lock_name: LockName,
    pub(crate) limit: Limit,
    pub(crate) max_wait_seconds: u32,
    pub(crate) workload_max_run_seconds: u32,
    pub(crate) lease_margin_seconds: u32,
    pub(crate) pass_lock_to_workload: bool,
    /// `${Partition}` of the service integrations: `aws`, `aws-cn`, ..., or a
    /// placeholder left for the user's DefinitionSubstitutions.
    pub(crate) partition: String,
    /// The user's definition's query language (not a flag: read from it).
    pub(crate) flavour: Flavour,
}

impl Settings {
    /// The reviewed file the output is built from, under statemachine/.
    pub(crate) fn file(&self) -> &'static str {
        self.mode.file(self.flavour)
    }

    /// The longest the execution waits for the lock, which its TimeoutSeconds
    /// adds to the user's: `--max-wait-seconds` in wait mode, 0 in skip mode.
    pub(crate) fn wait_seconds(&self) -> u64 {
        match self.mode {
            Mode::Wait => u64::from(self.max_wait_seconds),
            Mode::Skip => 0,
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
    /// The file of `settings.mode` with its placeholders filled in and
    /// `lease_seconds` as the lease Acquire Lock asks for.
    pub(crate) fn load(settings: &Settings, lease_seconds: u64) -> Result<Template, String> {
        let held = u64::from(settings.workload_max_run_seconds);
        Template::load_holding(settings, lease_seconds, held)
    }

    /// The same, with `held_seconds` as the Seconds of Wait For Workload To
    /// Stop (timing.rs's H: `--workload-max-run-seconds`, plus 300 s for
    /// Express child executions).
    pub(crate) fn load_holding(
        settings: &Settings,
        lease_seconds: u64,
        held_seconds: u64,
    ) -> Result<Template, String> {
        let file = settings.mode.file(settings.flavour);
        let mut text = settings.mode.template(settings.flavour).to_owned();
        let lease = match settings.flavour {
            Flavour::JsonPath => LEASE_EXPRESSION,
            Flavour::Jsonata => LEASE_EXPRESSION_JSONATA,
        };
        if text.matches(lease).count() != 1 {
            return Err(format!("{file}: expected once {lease}"));
        }
        text = text.replace(lease, &format!(r#""leaseSeconds": {lease_seconds}"#));
        let substitutions = [
            ("Partition", settings.partition.clone()),
            ("WorkloadMaxRunSeconds", held_seconds.to_string()),
            (
                "LeaseMarginSeconds",
                settings.lease_margin_seconds.to_string(),
            ),
            ("MaxWaitSeconds", settings.max_wait_seconds.to_string()),
            ("LockLimit", settings.limit.get().to_string()),
            (
                "LockResultPath",
                if settings.pass_lock_to_workload {
                    r#""$.sfnLock""#
                } else {
                    "null"
                }
                .to_owned(),
            ),
            // The sample Task's timeout, the one place left once the lease
            // is a literal: the branch is replaced, but the file must parse
            // first.
            ("WorkloadTimeoutSeconds", "1".to_owned()),
        ];
        for (name, value) in &substitutions {
            text = text.replace(&format!("${{{name}}}"), value);
        }
        let value = serde_json::from_str(&text)
            .map_err(|error| format!("{file} does not parse once filled in: {error}"))?;
        Ok(Template { text, value })
    }

    /// The names of the lock's states in the output (the user's must differ):
    /// the file's, but those it leaves out.
    pub(crate) fn state_names(&self) -> BTreeSet<String> {
        let left_out = self.left_out();
        self.value["States"]
            .as_object()
            .map(|states| {
                states
                    .keys()
                    .filter(|name| !left_out.contains(name))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The file's states the output leaves out: those that route the
    /// sample Task's marker, which no path reaches once the Parallel goes
    /// straight to Release Lock. The user's states replace the sample Task
    /// and never write the marker (a user's own output with such a field
    /// would be misrouted), and an unreachable state is invalid ASL. Found
    /// by reachability rather than named, so that a changed router is left
    /// out too.
    pub(crate) fn left_out(&self) -> Vec<String> {
        let mut value = self.value.clone();
        value["States"][WORKLOAD_STATE]["Next"] = RELEASE_STATE.into();
        match (value["States"].as_object(), value["StartAt"].as_str()) {
            (Some(states), Some(start)) => unreachable(states, start),
            _ => Vec::new(),
        }
    }
}
