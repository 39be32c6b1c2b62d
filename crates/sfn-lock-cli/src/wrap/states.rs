//! Walking a definition's state machines: the top level, Parallel branches
//! and Map processors, each a `StartAt` and `States` (ASL: "exactly like
//! those in the top level"), with state names unique across all of them.

use serde_json::{Map, Value};

/// A state machine's `States`, once its `StartAt` and `States` make sense
/// (the top level, a Parallel branch, a Map's processor).
pub(crate) fn machine<'d>(
    what: &str,
    machine: &'d Map<String, Value>,
) -> Result<&'d Map<String, Value>, String> {
    let start_at = match machine.get("StartAt") {
        Some(Value::String(start_at)) => start_at,
        Some(other) => {
            return Err(format!(
                "{what}: StartAt is {}, not a state name",
                kind(other)
            ))
        }
        None => return Err(format!("{what} has no StartAt")),
    };
    let states = match machine.get("States") {
        Some(Value::Object(states)) if !states.is_empty() => states,
        Some(Value::Object(_)) => return Err(format!("{what}: States is empty")),
        Some(other) => return Err(format!("{what}: States is {}, not an object", kind(other))),
        None => return Err(format!("{what} has no States")),
    };
    if !states.contains_key(start_at) {
        return Err(format!(
            "{what}: StartAt names \"{start_at}\", which is not in States"
        ));
    }
    if let Some((name, state)) = states.iter().find(|(_, state)| !state.is_object()) {
        return Err(format!(
            "{what}: state \"{name}\" is {}, not an object",
            kind(state)
        ));
    }
    Ok(states)
}

/// What `for_each_state` does with each state: its name, its fields.
type Visit<'v> = dyn FnMut(&str, &Map<String, Value>) -> Result<(), String> + 'v;

/// Calls `visit` on every state, nested ones included (Parallel branches, Map
/// processors: state names are unique across all of them). The nesting is
/// bounded: serde_json refuses documents nested over 128 deep.
pub(crate) fn for_each_state(states: &Map<String, Value>, visit: &mut Visit) -> Result<(), String> {
    for (name, state) in states {
        let Value::Object(state) = state else {
            continue;
        };
        visit(name, state)?;
        let branches = state.get("Branches").and_then(Value::as_array);
        let processor = state.get("ItemProcessor").or_else(|| state.get("Iterator"));
        let nested = branches.into_iter().flatten().chain(processor);
        for inner in nested {
            let Value::Object(inner) = inner else {
                return Err(format!(
                    "state \"{name}\": a branch or processor that is not an object"
                ));
            };
            for_each_state(machine(&format!("state \"{name}\""), inner)?, visit)?;
        }
    }
    Ok(())
}

/// What a JSON value is, for a message that says what was expected instead.
pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The states of a state machine's `states` that no path from `start`
/// reaches: through Next, Default, a Choice rule's Next or a Catch's Next
/// (a Choice rule's Next is at its top level, And/Or/Not have none).
pub(crate) fn unreachable(states: &Map<String, Value>, start: &str) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    let mut next = vec![start.to_owned()];
    while let Some(name) = next.pop() {
        let Some(state) = states.get(&name) else {
            continue;
        };
        if !seen.insert(name) {
            continue;
        }
        let rules = ["Choices", "Catch"]
            .iter()
            .filter_map(|field| state.get(*field).and_then(Value::as_array))
            .flatten();
        let targets = [state.get("Next"), state.get("Default")]
            .into_iter()
            .flatten()
            .chain(rules.filter_map(|rule| rule.get("Next")));
        next.extend(targets.filter_map(Value::as_str).map(String::from));
    }
    states
        .keys()
        .filter(|name| !seen.contains(*name))
        .cloned()
        .collect()
}

/// How a Lambda invoke Task sets its `InvocationType`, in `Parameters`
/// (JSONPath) or `Arguments` (JSONata).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Invocation<'s> {
    /// Not set: `RequestResponse`, synchronous.
    Default,
    /// Written out.
    Written(&'s str),
    /// Chosen at run time (`InvocationType.$`, a JSONata expression, or
    /// JSONata `Arguments` that are one expression): it may be `Event`.
    AtRunTime,
}

pub(crate) fn invocation_type(state: &Map<String, Value>) -> Invocation<'_> {
    let arguments = state.get("Parameters").or_else(|| state.get("Arguments"));
    let fields = match arguments {
        None => return Invocation::Default,
        Some(Value::Object(fields)) => fields,
        Some(_) => return Invocation::AtRunTime,
    };
    if fields.contains_key("InvocationType.$") {
        return Invocation::AtRunTime;
    }
    match fields.get("InvocationType") {
        None => Invocation::Default,
        Some(Value::String(written)) if !written.trim_start().starts_with("{%") => {
            Invocation::Written(written)
        }
        Some(_) => Invocation::AtRunTime,
    }
}
