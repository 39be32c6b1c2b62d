//! Test fixtures the wrap modules share: settings, the rules a definition is
//! checked against, and a small definition to edit into each case.

use std::collections::BTreeSet;

use serde_json::{json, Value};
use sfn_lock::Limit;

use super::check::{check, Rules, UserDefinition};
use super::errors::{may_still_run_errors, work_may_still_run};
use super::template::{Flavour, LockName, Mode, Settings, Template};
use super::timing::Bounds;

/// The flags' defaults, with `--lock-name etl`.
pub(crate) fn settings() -> Settings {
    Settings {
        mode: Mode::Wait,
        lock_name: LockName::Fixed(sfn_lock::LockName::new("etl").expect("a valid name")),
        limit: Limit::ONE,
        max_wait_seconds: 3600,
        workload_max_run_seconds: 900,
        lease_margin_seconds: 300,
        pass_lock_to_workload: false,
        partition: "aws".into(),
        flavour: Flavour::JsonPath,
    }
}

fn lock_states() -> BTreeSet<String> {
    ["Acquire Lock", "Run Workload Under Lock", "Release Lock"]
        .map(String::from)
        .into()
}

/// The set as read from the reviewed file of `mode`.
pub(crate) fn work_may_still_run_in(mode: Mode) -> BTreeSet<String> {
    let template = Template::load(&Settings { mode, ..settings() }, 60).expect("template loads");
    work_may_still_run(&may_still_run_errors(&template.value).expect("the list"))
}

/// The bounds of the reviewed file with the default flags (wait mode).
pub(crate) fn bounds() -> Bounds {
    let template = Template::load(&settings(), 60).expect("template loads");
    Bounds::new(&settings(), &template.value).expect("bounds")
}

pub(crate) fn check_with(definition: &Value, allow_unsafe: bool) -> Result<UserDefinition, String> {
    let rules = Rules {
        lock_states: &lock_states(),
        work_may_still_run: &work_may_still_run_in(Mode::Wait),
        allow_unsafe_error_handling: allow_unsafe,
        bounds: &bounds(),
    };
    check(definition, &rules)
}

pub(crate) fn sample() -> Value {
    json!({
        "Comment": "nightly",
        "TimeoutSeconds": 600,
        "StartAt": "A",
        "States": {
            "A": {"Type": "Pass", "Next": "B"},
            "B": {"Type": "Parallel", "Branches": [
                {"StartAt": "C", "States": {"C": {"Type": "Pass", "End": true}}}
            ], "End": true}
        }
    })
}

pub(crate) fn refusal(definition: Value) -> String {
    check_with(&definition, false).expect_err("refused")
}

pub(crate) fn with(field: &str, value: Value) -> Value {
    let mut definition = sample();
    definition[field] = value;
    definition
}

/// The sample with `handling` (a Retry or Catch field) on the branch's state C.
pub(crate) fn with_nested(field: &str, handling: Value) -> Value {
    let mut definition = sample();
    definition["States"]["B"]["Branches"][0]["States"]["C"] = json!({
        "Type": "Task",
        "Resource": "arn:aws:states:::lambda:invoke",
        "Parameters": {"FunctionName": "f"},
        "TimeoutSeconds": 5,
        field: handling,
        "End": true
    });
    definition
}
