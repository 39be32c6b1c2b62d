//! Builds the wrapped definition: the reviewed file (template.rs) with the
//! example workload branch replaced by the user's states, the Parallel's
//! Catch of the user's shape (shape.rs) and its Next to Release Lock, the
//! states that route the sample's marker left out (Template::left_out), the lock name filled in, the Comments
//! (comment.rs, shape.rs), the TimeoutSeconds (timing.rs) and the
//! user's Version set.
//!
//! The output is made twice: as text (text.rs: the files' and the user's
//! own order and layout) and as parsed values (the plain meaning of the
//! edit). The text is printed only if both agree.

use std::ops::Range;

use serde_json::{json, Value};

use super::comment::comment;
use super::errors::may_still_run_errors;
use super::shape::Shape;
use super::template::{Flavour, Settings, Template, RELEASE_STATE, WAIT_STATE, WORKLOAD_STATE};
use super::text::{indent_of_line, member_range, reindent, replace_ranges, value_at};
use super::timing::Timing;

/// How each lock state names its lock in the files (placeholder `LockName`).
const LOCK_NAME_FIELD: &str = r#""lockName": "${LockName}""#;
/// The lock states that name the lock: Acquire Lock, Release Lock, Release Lock After Failure.
const LOCK_NAME_FIELDS: usize = 3;

/// What the user's definition contributes: its text (for the layout of its
/// states), its parsed value, and what the check made of it.
pub(crate) struct UserParts<'u> {
    pub(crate) text: &'u str,
    pub(crate) value: &'u Value,
    pub(crate) timing: &'u Timing,
    pub(crate) shape: &'u Shape,
    pub(crate) comment: Option<&'u str>,
    pub(crate) version: Option<&'u str>,
}

/// The wrapped definition's text. Errors are sfn-lock's own (a reviewed
/// file that no longer has the expected shape), never the user's.
pub(crate) fn build(
    template: &Template,
    settings: &Settings,
    user: &UserParts,
) -> Result<String, String> {
    let file = settings.file();
    let left_out = template.left_out();
    let comment = comment(settings, user, &template.value, &left_out);
    let (lock_field, lock_value) = settings.lock_name.field(settings.flavour)?;
    let held = user.timing.bounds.describe_held();
    // The values a wrap sets in the file's states.
    let values: [(&[&str], Value); 4] = [
        (
            &["States", WORKLOAD_STATE, "Comment"],
            json!(user.shape.workload_comment(&held)),
        ),
        (
            &["States", WORKLOAD_STATE, "Catch"],
            user.shape.catch(&may_still_run_errors(&template.value)?),
        ),
        (&["States", WORKLOAD_STATE, "Next"], json!(RELEASE_STATE)),
        (
            &["States", WAIT_STATE, "Comment"],
            json!(user.shape.wait_comment(&held)),
        ),
    ];

    // As text.
    let find = |path: &[&str]| {
        value_at(&template.text, path).ok_or_else(|| format!("{file}: no {}", path.join(".")))
    };
    let mut edits: Vec<(Range<usize>, String)> = Vec::new();
    for (path, value) in &values {
        let range = find(path)?;
        let pretty = serde_json::to_string_pretty(value).map_err(|error| error.to_string())?;
        let indent = indent_of_line(&template.text, range.start);
        edits.push((range, reindent(&pretty, 0, indent)));
    }
    let branches = find(&["States", WORKLOAD_STATE, "Branches"])?;
    let user_states = value_at(user.text, &["States"]).ok_or("the definition's States moved")?;
    let user_states_text = user
        .text
        .get(user_states.clone())
        .ok_or("the definition's States moved")?;
    let outer = indent_of_line(&template.text, branches.start);
    let new_branches = format!(
        "[\n{pad2}{{\n{pad4}\"StartAt\": {start},\n{pad4}\"States\": {states}\n{pad2}}}\n{pad0}]",
        pad0 = " ".repeat(outer),
        pad2 = " ".repeat(outer + 2),
        pad4 = " ".repeat(outer + 4),
        start = json!(user.value["StartAt"]),
        states = reindent(
            user_states_text,
            indent_of_line(user.text, user_states.start),
            outer + 4
        ),
    );
    edits.push((branches, new_branches));
    // The file has no execution timeout; the wrap's follows the Comment.
    let mut top = format!(
        "{},\n  \"TimeoutSeconds\": {}",
        json!(comment),
        user.timing.execution_timeout
    );
    if let Some(version) = user.version {
        top.push_str(&format!(",\n  \"Version\": {}", json!(version)));
    }
    edits.push((find(&["Comment"])?, top));
    let states_start = find(&["States"])?.start;
    for name in &left_out {
        let range = member_range(&template.text, states_start, name)
            .ok_or_else(|| format!("{file}: no state \"{name}\""))?;
        edits.push((range, String::new()));
    }
    let text = replace_ranges(&template.text, edits)
        .ok_or_else(|| format!("{file}: the edited ranges overlap"))?;
    if text.matches(LOCK_NAME_FIELD).count() != LOCK_NAME_FIELDS {
        return Err(format!(
            "{file}: expected {LOCK_NAME_FIELDS} times {LOCK_NAME_FIELD}"
        ));
    }
    let text = text.replace(
        LOCK_NAME_FIELD,
        &format!("{}: {}", json!(lock_field), json!(lock_value)),
    );

    // As values: the same edit, which the text must mean.
    let mut expected = template.value.clone();
    expected["Comment"] = json!(comment);
    expected["TimeoutSeconds"] = json!(user.timing.execution_timeout);
    if let Some(version) = user.version {
        expected["Version"] = json!(version);
    }
    for (path, value) in values {
        let slot = path.iter().fold(&mut expected, |slot, key| &mut slot[*key]);
        *slot = value;
    }
    expected["States"][WORKLOAD_STATE]["Branches"] =
        json!([{"StartAt": user.value["StartAt"], "States": user.value["States"]}]);
    if let Some(states) = expected["States"].as_object_mut() {
        for name in &left_out {
            states.remove(name);
        }
        for state in states.values_mut() {
            // Parameters in JSONPath states, Arguments in JSONata ones.
            let payload = match settings.flavour {
                Flavour::JsonPath => "/Parameters/Payload",
                Flavour::Jsonata => "/Arguments/Payload",
            };
            if let Some(payload) = state.pointer_mut(payload).and_then(Value::as_object_mut) {
                if payload.remove("lockName").is_some() {
                    payload.insert(lock_field.to_owned(), json!(lock_value));
                }
            }
        }
    }
    let printed: Value = serde_json::from_str(&text)
        .map_err(|error| format!("the wrapped text does not parse: {error}"))?;
    if printed != expected {
        return Err("the wrapped text does not say what the wrap means".into());
    }
    Ok(text + "\n")
}

// The tests build from parts as the pipeline does; in a file of their own.
#[cfg(test)]
mod tests;
