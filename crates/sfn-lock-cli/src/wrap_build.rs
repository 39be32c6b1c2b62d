//! Builds the wrapped definition: the reviewed file (wrap_template) with the
//! example workload branch replaced by the user's states, the lock name
//! filled in and the Comment (wrap_comment) and the user's Version set.
//!
//! The output is made twice: as text (wrap_text: the files' and the user's
//! own order and layout) and as parsed values (the plain meaning of the
//! edit). The text is printed only if both agree.

use serde_json::{json, Value};

use super::comment::comment;
use super::template::{Settings, Template, WORKLOAD_STATE};
use super::text::{indent_of_line, reindent, replace_ranges, value_at};

/// How each lock state names its lock in the files (placeholder `LockName`).
const LOCK_NAME_FIELD: &str = r#""lockName": "${LockName}""#;
/// The lock states that name the lock: Acquire Lock, Release Lock, Release Lock After Failure.
const LOCK_NAME_FIELDS: usize = 3;

/// What the user's definition contributes: its text (for the layout of its
/// states), its parsed value and its own TimeoutSeconds (for the Comment).
pub(crate) struct UserParts<'u> {
    pub(crate) text: &'u str,
    pub(crate) value: &'u Value,
    pub(crate) timeout_seconds: u64,
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
    let file = settings.mode.file();
    let comment = comment(settings, user, &template.value);
    let (lock_field, lock_value) = settings.lock_name.field();

    // As text.
    let find = |path: &[&str]| {
        value_at(&template.text, path).ok_or_else(|| format!("{file}: no {}", path.join(".")))
    };
    let branches = find(&["States", WORKLOAD_STATE, "Branches"])?;
    let comment_range = find(&["Comment"])?;
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
    let mut new_comment = json!(comment).to_string();
    if let Some(version) = user.version {
        new_comment.push_str(&format!(",\n  \"Version\": {}", json!(version)));
    }
    let text = replace_ranges(
        &template.text,
        vec![(branches, new_branches), (comment_range, new_comment)],
    )
    .ok_or_else(|| format!("{file}: Comment and Branches overlap"))?;
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
    if let Some(version) = user.version {
        expected["Version"] = json!(version);
    }
    expected["States"][WORKLOAD_STATE]["Branches"] =
        json!([{"StartAt": user.value["StartAt"], "States": user.value["States"]}]);
    if let Some(states) = expected["States"].as_object_mut() {
        for state in states.values_mut() {
            if let Some(payload) = state
                .pointer_mut("/Parameters/Payload")
                .and_then(Value::as_object_mut)
            {
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::super::template::{LockName, Mode};
    use super::*;

    /// The placeholders that stay in the output, for the user's template.
    const KEPT_PLACEHOLDERS: [&str; 2] = ["AcquireLockFunctionArn", "ReleaseLockFunctionArn"];

    fn settings(mode: Mode) -> Settings {
        Settings {
            mode,
            lock_name: LockName::Fixed("nightly \"etl\"".into()),
            limit: 3,
            max_wait_seconds: 120,
            workload_max_run_seconds: 900,
            lease_margin_seconds: 300,
            pass_lock_to_workload: false,
            partition: "aws".into(),
        }
    }

    const USER: &str = r#"{
  "Comment": "Mine",
  "Version": "1.0",
  "TimeoutSeconds": 600,
  "StartAt": "Zeta",
  "States": {
    "Zeta": {"Type": "Pass", "Next": "Alpha"},
    "Alpha": {
      "Type": "Task",
      "Resource": "${MyFunctionArn}",
      "Retry": [{"ErrorEquals": ["Boom"], "MaxAttempts": 2}],
      "End": true
    }
  }
}"#;

    fn wrapped(settings: &Settings) -> (String, Value) {
        let user: Value = serde_json::from_str(USER).expect("sample parses");
        let template =
            Template::load(settings, 600 + settings.wait_seconds()).expect("template loads");
        let parts = UserParts {
            text: USER,
            value: &user,
            timeout_seconds: 600,
            comment: Some("Mine"),
            version: Some("1.0"),
        };
        let text = build(&template, settings, &parts).expect("wraps");
        let value = serde_json::from_str(&text).expect("output parses");
        (text, value)
    }

    fn placeholders(text: &str) -> BTreeSet<&str> {
        text.match_indices("${")
            .filter_map(|(at, _)| text[at + 2..].split_once('}').map(|(name, _)| name))
            .collect()
    }

    #[test]
    fn the_lock_states_are_the_files_own_but_the_branch_and_lock_name() {
        for mode in [Mode::Wait, Mode::Skip] {
            let settings = settings(mode);
            let (_, out) = wrapped(&settings);
            let execution_timeout = 600 + settings.wait_seconds();
            let template = Template::load(&settings, execution_timeout).expect("template loads");
            let original = &template.value["States"];
            let states = out["States"].as_object().expect("States");
            assert_eq!(
                states.len(),
                original.as_object().map(|o| o.len()).unwrap_or(0)
            );
            for (name, state) in states {
                let mut state = state.clone();
                if let Some(payload) = state
                    .pointer_mut("/Parameters/Payload")
                    .and_then(Value::as_object_mut)
                {
                    if let Some(name) = payload.remove("lockName") {
                        assert_eq!(name, json!("nightly \"etl\""));
                        payload.insert("lockName".into(), json!("${LockName}"));
                    }
                }
                if name == WORKLOAD_STATE {
                    state["Branches"] = original[name]["Branches"].clone();
                }
                assert_eq!(&state, &original[name], "{mode:?}: state {name}");
            }
            assert_eq!(out["TimeoutSeconds"], json!(execution_timeout));
            assert_eq!(out["Version"], json!("1.0"));
        }
    }

    #[test]
    fn the_branch_is_the_users_states_in_their_order() {
        let (text, out) = wrapped(&settings(Mode::Wait));
        let user: Value = serde_json::from_str(USER).expect("sample parses");
        let branch = &out["States"][WORKLOAD_STATE]["Branches"];
        assert_eq!(
            branch,
            &json!([{"StartAt": "Zeta", "States": user["States"]}])
        );
        let zeta = text.find("\"Zeta\": {").expect("Zeta printed");
        let alpha = text.find("\"Alpha\": {").expect("Alpha printed");
        assert!(zeta < alpha, "the user's order kept:\n{text}");
        assert!(
            text.contains("\n            \"Zeta\": {\"Type\": \"Pass\""),
            "reindented:\n{text}"
        );
    }

    #[test]
    fn only_the_function_arns_and_the_users_own_placeholders_stay() {
        for mode in [Mode::Wait, Mode::Skip] {
            let (text, _) = wrapped(&settings(mode));
            let mut expected: BTreeSet<&str> = KEPT_PLACEHOLDERS.into();
            expected.insert("MyFunctionArn");
            assert_eq!(placeholders(&text), expected, "{mode:?}");
        }
    }

    #[test]
    fn the_lock_states_are_in_the_partition_or_keep_its_placeholder() {
        for (partition, resource) in [
            ("aws-cn", "arn:aws-cn:states:::lambda:invoke"),
            ("${Partition}", "arn:${Partition}:states:::lambda:invoke"),
        ] {
            let settings = Settings {
                partition: partition.into(),
                ..settings(Mode::Skip)
            };
            let (text, out) = wrapped(&settings);
            for state in ["Acquire Lock", "Release Lock", "Release Lock After Failure"] {
                assert_eq!(out["States"][state]["Resource"], json!(resource), "{state}");
            }
            let mut expected: BTreeSet<&str> = KEPT_PLACEHOLDERS.into();
            expected.insert("MyFunctionArn");
            if partition.starts_with("${") {
                expected.insert("Partition");
            }
            assert_eq!(placeholders(&text), expected, "{partition}");
        }
    }

    #[test]
    fn prints_nothing_when_the_text_and_the_values_disagree() {
        // Cannot happen with one document as both; stands for any splice bug.
        let settings = settings(Mode::Wait);
        let template = Template::load(&settings, 600).expect("template loads");
        let other: Value = serde_json::from_str(&USER.replace("Zeta", "Eta")).expect("parses");
        let parts = UserParts {
            text: USER,
            value: &other,
            timeout_seconds: 600,
            comment: None,
            version: None,
        };
        let error = build(&template, &settings, &parts).expect_err("refused");
        assert!(
            error.contains("does not say what the wrap means"),
            "{error}"
        );
    }

    #[test]
    fn fills_in_the_settings() {
        let mut settings = settings(Mode::Wait);
        settings.lock_name = LockName::InputPath("$.customer.id".into());
        settings.pass_lock_to_workload = true;
        let (_, out) = wrapped(&settings);
        let acquire = &out["States"]["Acquire Lock"];
        let payload = &acquire["Parameters"]["Payload"];
        assert_eq!(
            payload["lockName.$"],
            json!("$$.Execution.Input.customer.id")
        );
        assert_eq!(payload.get("lockName"), None);
        assert_eq!(payload["limit"], json!(3));
        assert_eq!(payload["maxWaitSeconds"], json!(120));
        assert_eq!(
            payload["leaseSeconds.$"],
            json!("States.MathAdd(States.MathAdd(720, 900), 300)")
        );
        assert_eq!(acquire["ResultPath"], json!("$.sfnLock"));
        let release = &out["States"]["Release Lock After Failure"]["Parameters"]["Payload"];
        assert_eq!(
            release["lockName.$"],
            json!("$$.Execution.Input.customer.id")
        );
        assert_eq!(
            out["States"]["Wait For Timed-Out Workload To Stop"]["Seconds"],
            json!(900)
        );
        let comment = out["Comment"].as_str().expect("Comment");
        assert!(
            comment.starts_with("Mine [sfn-lock wrap --mode wait:"),
            "{comment}"
        );
        assert!(comment.contains("named by $.customer.id"), "{comment}");
    }
}
