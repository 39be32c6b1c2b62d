//! A Map that tolerates failed items (ToleratedFailureCount,
//! ToleratedFailurePercentage, or their `...Path` forms, above 0): an item
//! that failed while its work may still run (its task timed out or met a
//! Lambda service error, or one piece of it failed while others ran beside
//! it) counts as tolerated, the Map succeeds, the user's states end and the
//! lock is released at once, as after any success, while that work runs on:
//! the held path is taken only by errors. This is the unsafe Retry and
//! Catch of errors.rs in another form, and shares its refusal and escape
//! hatch. The tolerance cannot tell such an item from one that failed for
//! good, so any tolerance above 0 is refused; a `...Path` form is refused
//! whatever it holds, because its value is read only at run time. A
//! tolerance of 0 is the default: a failed item fails the Map (a
//! Distributed Map with States.ExceedToleratedFailureThreshold), and since
//! any Map makes every error out of the user's states hold the lock
//! (shape.rs), the lock is held until the work has stopped.

use serde_json::{Map, Value};

use super::errors::Unsafe;

/// The fields that set a Map's tolerance, as numbers.
const TOLERANCE_FIELDS: [&str; 2] = ["ToleratedFailureCount", "ToleratedFailurePercentage"];

/// What to do about a tolerance instead.
const REMEDY: &str = "set it to 0 (or remove it) so that a failed item fails the Map and the \
    lock's own states hold the lock until the work has stopped, and handle failed items inside \
    the item processor, retrying or catching only errors after which the work did not start or \
    has ended";

/// Each field of `state` that tolerates failed items, in the order of
/// TOLERANCE_FIELDS, a field before its `...Path` form.
pub(crate) fn tolerated_failures(name: &str, state: &Map<String, Value>) -> Vec<Unsafe> {
    let mut found = Vec::new();
    for field in TOLERANCE_FIELDS {
        // 0 and 0.0 alike; anything else (a number above 0, or a value that
        // is no number, which the service would refuse anyway) is suspect.
        match state.get(field) {
            Some(value) if value.as_f64() != Some(0.0) => {
                found.push(describe(name, &format!("{field} {value}")))
            }
            _ => {}
        }
        let path = format!("{field}Path");
        if let Some(value) = state.get(&path) {
            found.push(describe(
                name,
                &format!("{path} {value}, which may be above 0 at run time"),
            ));
        }
    }
    found
}

fn describe(state: &str, tolerance: &str) -> Unsafe {
    Unsafe {
        description: format!(
            "state \"{state}\" has {tolerance}: an item that fails while its work may still \
             run (States.Timeout, States.HeartbeatTimeout, a Lambda service error, or one piece \
             failing beside others) counts as tolerated, the Map succeeds, and the lock is \
             released when your states end while that work may run on"
        ),
        remedy: REMEDY,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::super::fixtures::{check_with, refusal, sample};

    /// The sample with its state B a Distributed Map with `tolerance` fields.
    fn map_with(tolerance: Value) -> Value {
        let mut definition = sample();
        let mut map = json!({
            "Type": "Map",
            "ItemProcessor": {
                "ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"},
                "StartAt": "M",
                "States": {"M": {"Type": "Task", "Resource": "r", "TimeoutSeconds": 5, "End": true}}
            },
            "End": true
        });
        for (field, value) in tolerance.as_object().expect("fields") {
            map[field] = value.clone();
        }
        definition["States"]["B"] = map;
        definition
    }

    #[test]
    fn refuses_a_map_that_tolerates_failed_items() {
        let count = refusal(map_with(json!({"ToleratedFailureCount": 3})));
        assert!(
            count.starts_with("state \"B\" has ToleratedFailureCount 3: an item"),
            "{count}"
        );
        for expected in [
            "States.Timeout",
            "set it to 0",
            "--allow-unsafe-error-handling",
        ] {
            assert!(count.contains(expected), "{expected:?} in {count}");
        }
        assert!(!count.contains('\n'), "one line: {count}");
        let percentage = refusal(map_with(json!({"ToleratedFailurePercentage": 2.5})));
        assert!(
            percentage.starts_with("state \"B\" has ToleratedFailurePercentage 2.5:"),
            "{percentage}"
        );
        for field in [
            "ToleratedFailureCountPath",
            "ToleratedFailurePercentagePath",
        ] {
            let path = refusal(map_with(json!({field: "$.tolerated"})));
            assert!(
                path.starts_with(&format!(
                    "state \"B\" has {field} \"$.tolerated\", which may be above 0 at run time:"
                )),
                "{path}"
            );
        }
        // In a nested Map too: the sample's Parallel branch.
        let mut nested = sample();
        nested["States"]["B"]["Branches"][0]["States"]["C"] =
            map_with(json!({"ToleratedFailureCount": 1}))["States"]["B"].clone();
        assert!(refusal(nested).starts_with("state \"C\" has ToleratedFailureCount 1"));
    }

    #[test]
    fn a_tolerance_of_zero_passes() {
        for tolerance in [
            json!({"ToleratedFailureCount": 0}),
            json!({"ToleratedFailurePercentage": 0}),
            json!({"ToleratedFailurePercentage": 0.0, "ToleratedFailureCount": 0}),
        ] {
            let checked = check_with(&map_with(tolerance.clone()), false);
            assert!(checked.is_ok(), "{tolerance}: {checked:?}");
        }
    }

    #[test]
    fn the_escape_hatch_warns_once_per_tolerance_field() {
        let definition = map_with(json!({
            "ToleratedFailureCount": 1,
            "ToleratedFailurePercentage": 10
        }));
        let checked = check_with(&definition, true).expect("wrapped anyway");
        assert_eq!(checked.warnings.len(), 2, "{:?}", checked.warnings);
        assert!(checked.warnings[0].starts_with("state \"B\" has ToleratedFailureCount 1"));
        assert!(checked.warnings[1].starts_with("state \"B\" has ToleratedFailurePercentage 10"));
        for warning in &checked.warnings {
            assert!(
                warning.ends_with("(wrapped anyway: --allow-unsafe-error-handling)"),
                "{warning}"
            );
        }
    }
}
