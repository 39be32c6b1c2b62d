//! What `sfn-lock wrap` refuses, before it builds anything: each check names
//! what is wrong and what to do, in one line. The checks run in the order of
//! their refusals' importance: no definition at all, then its query
//! languages (a JSONPath state inside a JSONata state machine, which ASL
//! does not allow; the output keeps the top level's), a second wrap, a lock
//! state's name, the timeout, and last the error handling (errors.rs).
//! A definition that passes also gets its shape (shape.rs) and its
//! timing (timing.rs), which the output is built from.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::errors::unsafe_error_handling;
use super::shape::{express_child_map, shape, Shape};
use super::states::{for_each_state, kind, machine};
use super::template::Flavour;
use super::timing::{Bounds, Timing};

/// The top-level fields of an ASL definition (States Language specification,
/// "Top-level fields"; `QueryLanguage` since variables and JSONata).
const TOP_LEVEL_FIELDS: [&str; 6] = [
    "Comment",
    "StartAt",
    "States",
    "TimeoutSeconds",
    "Version",
    "QueryLanguage",
];

/// The user's top-level fields that the wrapped definition carries over
/// (`StartAt` and `States` are spliced in as text by build.rs), what they
/// make of the output (its timing, its Catch's shape), and the warnings to
/// print if the definition is wrapped.
#[derive(Debug, PartialEq)]
pub(crate) struct UserDefinition {
    pub(crate) timing: Timing,
    pub(crate) shape: Shape,
    pub(crate) comment: Option<String>,
    pub(crate) version: Option<String>,
    pub(crate) warnings: Vec<String>,
}

/// The prefix of the lock states' variables (`$sfnLock`, `$sfnLockResultPath`).
const LOCK_VARIABLES: &str = "sfnLock";

/// What a definition is checked against.
pub(crate) struct Rules<'r> {
    /// The names of the lock's own states.
    pub(crate) lock_states: &'r BTreeSet<String>,
    /// The errors after which a task's work may still be running
    /// (errors.rs' `work_may_still_run`).
    pub(crate) work_may_still_run: &'r BTreeSet<String>,
    /// --allow-unsafe-error-handling: warn instead of refusing.
    pub(crate) allow_unsafe_error_handling: bool,
    /// What the lock's states add to the user's TimeoutSeconds.
    pub(crate) bounds: &'r Bounds,
}

/// Checks `definition` can run as the lock's workload branch.
pub(crate) fn check(definition: &Value, rules: &Rules) -> Result<UserDefinition, String> {
    let Value::Object(top) = definition else {
        return Err(format!(
            "the top level is {}, not an object: an ASL definition is {{\"StartAt\": ..., \"States\": {{...}}}}",
            kind(definition)
        ));
    };
    if let Some(field) = top
        .keys()
        .find(|key| !TOP_LEVEL_FIELDS.contains(&key.as_str()))
    {
        return Err(format!(
            "unknown top-level field \"{field}\" (an ASL definition has {})",
            TOP_LEVEL_FIELDS.join(", ")
        ));
    }
    let flavour = query_language(top, "at the top level")?;
    let states = machine("the definition", top)?;
    for_each_state(states, &mut |name, state| {
        let place = format!("in state \"{name}\"");
        match (flavour, query_language(state, &place)?) {
            // ASL: "a JSONata state machine cannot contain JSONPath states".
            (Flavour::Jsonata, Flavour::JsonPath) if state.contains_key("QueryLanguage") => {
                Err(format!(
                    "QueryLanguage JSONPath {place} of a JSONata state machine: a state machine \
                     whose top level is JSONata cannot hold JSONPath states (Step Functions \
                     refuses it); write the state in JSONata"
                ))
            }
            _ => Ok(()),
        }
    })?;
    if ["Acquire Lock", "Release Lock"]
        .iter()
        .all(|name| states.contains_key(*name))
    {
        return Err(
            "it already has sfn-lock's lock states (\"Acquire Lock\", \"Release Lock\"): \
                    it is locked already; wrap the original definition instead"
                .into(),
        );
    }
    for_each_state(states, &mut |name, state| {
        // The lock states keep the grant in variables of these names (the
        // JSONata flavour): one of the user's own would shadow or clash.
        let catchers = state.get("Catch").and_then(Value::as_array);
        let assigns = std::iter::once(state.get("Assign"))
            .chain(catchers.into_iter().flatten().map(|c| c.get("Assign")))
            .flatten()
            .filter_map(Value::as_object);
        match assigns
            .flat_map(|a| a.keys())
            .find(|k| k.starts_with(LOCK_VARIABLES))
        {
            Some(variable) => Err(format!(
                "state \"{name}\" assigns the variable ${variable}; variables whose name starts \
                 with {LOCK_VARIABLES} are the lock states' own: rename it"
            )),
            None => Ok(()),
        }
    })?;
    for_each_state(states, &mut |name, _| {
        if rules.lock_states.contains(name) {
            Err(format!(
                "state \"{name}\" has the name of one of the lock's states, and state names \
                 must be unique in the whole state machine, branches included: rename it"
            ))
        } else {
            Ok(())
        }
    })?;
    let timing = rules
        .bounds
        .with_express_map(express_child_map(states)?)
        .timing(timeout_seconds(top.get("TimeoutSeconds"))?)?;
    let warnings = unsafe_error_handling(
        states,
        rules.work_may_still_run,
        rules.allow_unsafe_error_handling,
    )?;
    Ok(UserDefinition {
        timing,
        shape: shape(states)?,
        comment: optional_string(top, "Comment")?,
        version: optional_string(top, "Version")?,
        warnings,
    })
}

/// The `QueryLanguage` of `fields` (the top level or a state; JSONPath when
/// absent), or why it is none of the two ASL knows.
fn query_language(fields: &Map<String, Value>, place: &str) -> Result<Flavour, String> {
    match fields.get("QueryLanguage") {
        None => Ok(Flavour::JsonPath),
        Some(Value::String(language)) if language == "JSONPath" => Ok(Flavour::JsonPath),
        Some(Value::String(language)) if language == "JSONata" => Ok(Flavour::Jsonata),
        Some(language) => Err(format!(
            "QueryLanguage {language} {place}: ASL knows \"JSONPath\" and \"JSONata\""
        )),
    }
}

/// The query language of a definition's top level, which the wrapped one
/// keeps (its lock states from statemachine/ or statemachine/jsonata/);
/// JSONPath for anything the check refuses anyway.
pub(crate) fn flavour_of(definition: &Value) -> Flavour {
    definition
        .as_object()
        .and_then(|top| query_language(top, "").ok())
        .unwrap_or_default()
}

/// The user's execution timeout, which the wrapped one and the lease are
/// derived from (timing.rs): required, because without it an execution
/// may run a year, longer than any lease.
fn timeout_seconds(value: Option<&Value>) -> Result<u64, String> {
    let Some(value) = value else {
        return Err(
            "no top-level TimeoutSeconds: the lock's lease is derived from the \
                    execution timeout, so add one (e.g. \"TimeoutSeconds\": 3600)"
                .into(),
        );
    };
    value
        .as_u64()
        .filter(|seconds| *seconds >= 1)
        .ok_or_else(|| format!("TimeoutSeconds is {value}, not a positive whole number of seconds"))
}

fn optional_string(top: &Map<String, Value>, field: &str) -> Result<Option<String>, String> {
    match top.get(field) {
        None => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(other) => Err(format!("{field} is {}, not a string", kind(other))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::fixtures::{check_with, refusal, sample, with};
    use sfn_lock::MAX_LEASE_SECONDS;

    #[test]
    fn a_plain_definition_passes_with_its_fields() {
        let checked = check_with(&sample(), false).expect("wrappable");
        assert_eq!(checked.timing.user, 600);
        assert_eq!(checked.comment.as_deref(), Some("nightly"));
        assert_eq!(checked.version, None);
        assert!(checked.warnings.is_empty(), "{:?}", checked.warnings);
    }

    #[test]
    fn refuses_what_is_no_definition() {
        assert!(refusal(json!([1])).contains("an array, not an object"));
        let mut no_states = sample();
        no_states.as_object_mut().map(|top| top.remove("States"));
        assert!(refusal(no_states).contains("has no States"));
        assert!(refusal(with("StartAt", json!("Z"))).contains("\"Z\", which is not in States"));
        assert!(refusal(with("States", json!({}))).contains("States is empty"));
        assert!(refusal(with("Extra", json!(1))).contains("unknown top-level field \"Extra\""));
    }

    #[test]
    fn takes_either_query_language_but_no_jsonpath_state_in_a_jsonata_machine() {
        for language in ["JSONPath", "JSONata"] {
            let top = with("QueryLanguage", json!(language));
            assert!(check_with(&top, false).is_ok(), "{language}");
        }
        assert!(refusal(with("QueryLanguage", json!("XPath"))).contains("at the top level"));
        // JSONata states in a JSONPath machine are ASL; the reverse is not.
        let mut nested = sample();
        nested["States"]["B"]["Branches"][0]["States"]["C"]["QueryLanguage"] = json!("JSONata");
        assert!(check_with(&nested, false).is_ok());
        nested["QueryLanguage"] = json!("JSONata");
        nested["States"]["B"]["Branches"][0]["States"]["C"]["QueryLanguage"] = json!("JSONPath");
        let refused = refusal(nested);
        assert!(
            refused.contains("QueryLanguage JSONPath in state \"C\""),
            "{refused}"
        );
    }

    #[test]
    fn refuses_lock_state_names_anywhere_and_a_second_wrap() {
        let mut nested = sample();
        let branch = &mut nested["States"]["B"]["Branches"][0];
        branch["States"] = json!({"Release Lock": {"Type": "Pass", "End": true}});
        branch["StartAt"] = json!("Release Lock");
        assert!(refusal(nested)
            .contains("state \"Release Lock\" has the name of one of the lock's states"));

        let mut wrapped = sample();
        wrapped["States"]["Acquire Lock"] = json!({"Type": "Pass", "Next": "A"});
        wrapped["States"]["Release Lock"] = json!({"Type": "Pass", "End": true});
        assert!(refusal(wrapped).contains("it is locked already"));
    }

    #[test]
    fn needs_a_timeout_the_lease_can_cover() {
        let mut none = sample();
        none.as_object_mut().map(|top| top.remove("TimeoutSeconds"));
        assert!(refusal(none).contains("no top-level TimeoutSeconds"));
        assert!(refusal(with("TimeoutSeconds", json!(0))).contains("not a positive whole number"));
        assert!(refusal(with("TimeoutSeconds", json!(1.5))).contains("not a positive whole number"));
        // The lease adds the bounds to the user's timeout (timing.rs).
        let timing = check_with(&sample(), false).expect("wrappable").timing;
        let longest = u64::from(MAX_LEASE_SECONDS) - (timing.lease - timing.user);
        assert!(check_with(&with("TimeoutSeconds", json!(longest)), false).is_ok());
        let over = refusal(with("TimeoutSeconds", json!(longest + 1)));
        assert!(over.contains("over the 31536000"), "{over}");
        assert!(over.contains("(--lease-margin-seconds)"), "{over}");
    }
}
