//! From the text of the user's definition to the wrapped one: parse it,
//! check it (check.rs), then build the output (build.rs) from the
//! reviewed file filled in with the settings (template.rs).

use serde_json::Value;

use super::build::{build, UserParts};
use super::check::{check, flavour_of, Rules};
use super::errors::{may_still_run_errors, work_may_still_run};
use super::template::{Settings, Template};
use super::timing::Bounds;

/// A wrapped definition, what the wrap chose (which errors hold the lock,
/// the timeout, the lease: each also in its Comment), and the warnings.
#[derive(Debug)]
pub(crate) struct Wrapped {
    pub(crate) definition: String,
    pub(crate) notes: Vec<String>,
    pub(crate) warnings: Vec<String>,
}

/// The wrapped definition for the text of the user's, or why it cannot be.
pub(crate) fn wrap_text(
    text: &str,
    settings: &Settings,
    allow_unsafe: bool,
) -> Result<Wrapped, String> {
    let value: Value = serde_json::from_str(text).map_err(|error| {
        // A file written for DefinitionSubstitutions may hold a bare
        // placeholder ("TimeoutSeconds": ${Timeout}), which is not JSON yet.
        let hint = if text.contains("${") {
            " (a ${...} placeholder outside a string? substitute it first)"
        } else {
            ""
        };
        format!("not JSON: {error}{hint}")
    })?;
    // The output keeps the definition's query language.
    let settings = &Settings {
        flavour: flavour_of(&value),
        ..settings.clone()
    };
    // A lock name the definition's language cannot carry is the user's
    // error (build.rs, which fills it in, reports only sfn-lock's own).
    settings
        .lock_name
        .field(settings.flavour)
        .map_err(|reason| format!("cannot wrap: {reason}"))?;
    // The lock states' names, errors and retriers, for the check; they do
    // not depend on the lease, which the check has yet to compute.
    let reviewed = Template::load(settings, 1).map_err(internal)?;
    let may_still_run = may_still_run_errors(&reviewed.value).map_err(internal)?;
    let rules = Rules {
        lock_states: &reviewed.state_names(),
        work_may_still_run: &work_may_still_run(&may_still_run),
        allow_unsafe_error_handling: allow_unsafe,
        bounds: &Bounds::new(settings, &reviewed.value).map_err(internal)?,
    };
    let checked = check(&value, &rules).map_err(|reason| format!("cannot wrap: {reason}"))?;
    let held = checked.timing.bounds.held_path();
    let template =
        Template::load_holding(settings, checked.timing.lease, held).map_err(internal)?;
    let parts = UserParts {
        text,
        value: &value,
        timing: &checked.timing,
        shape: &checked.shape,
        comment: checked.comment.as_deref(),
        version: checked.version.as_deref(),
    };
    let definition = build(&template, settings, &parts).map_err(internal)?;
    let notes = vec![
        checked
            .shape
            .describe(&checked.timing.bounds.describe_held()),
        checked.timing.describe_timeout(),
        checked.timing.describe_lease(),
    ];
    Ok(Wrapped {
        definition,
        notes,
        warnings: checked.warnings,
    })
}

fn internal(reason: String) -> String {
    format!("internal error, please report: {reason}")
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::settings;
    use super::super::template::Mode;
    use super::*;
    use sfn_lock::MAX_LEASE_SECONDS;

    /// A definition that can be wrapped, as short as one can be.
    const SMALLEST: &str =
        r#"{"TimeoutSeconds": 60, "StartAt": "A", "States": {"A": {"Type": "Pass", "End": true}}}"#;

    #[test]
    fn refusals_say_what_is_wrong() {
        let not_json = wrap_text("{\"StartAt\": ", &settings(), false).expect_err("refused");
        assert!(not_json.starts_with("not JSON: EOF"), "{not_json}");
        let bare =
            wrap_text("{\"TimeoutSeconds\": ${T}}", &settings(), false).expect_err("refused");
        assert!(bare.contains("placeholder outside a string"), "{bare}");
        let array = wrap_text("[]", &settings(), false).expect_err("refused");
        assert!(
            array.starts_with("cannot wrap: the top level is an array"),
            "{array}"
        );
    }

    #[test]
    fn a_wrapped_definition_cannot_be_wrapped_again() {
        let user = SMALLEST;
        let once = wrap_text(user, &settings(), false).expect("wraps");
        let twice = wrap_text(&once.definition, &settings(), false).expect_err("refused");
        assert!(twice.contains("it is locked already"), "{twice}");
    }

    fn wrapped_value(user: &str, settings: &Settings) -> Value {
        let wrapped = wrap_text(user, settings, false).expect("wraps");
        serde_json::from_str(&wrapped.definition).expect("the output parses")
    }

    #[test]
    fn the_timing_makes_the_timeout_and_the_lease_and_is_said() {
        let wrapped = wrap_text(SMALLEST, &settings(), false).expect("wraps");
        let out: Value = serde_json::from_str(&wrapped.definition).expect("the output parses");
        // 60 + 3600 s wait + 285 s past it + 900 s held + 303 s release.
        assert_eq!(out["TimeoutSeconds"], serde_json::json!(5148));
        let payload = &out["States"]["Acquire Lock"]["Parameters"]["Payload"];
        assert_eq!(payload["leaseSeconds"], serde_json::json!(5148 + 900 + 300));
        let comment = out["Comment"].as_str().expect("a Comment");
        // The Comment and stderr say the same: shape, timeout, lease.
        assert_eq!(wrapped.notes.len(), 3, "{:?}", wrapped.notes);
        for note in &wrapped.notes {
            assert!(comment.contains(note.as_str()), "{note:?} in {comment}");
        }
        assert!(wrapped.notes[1].starts_with("TimeoutSeconds is 5148 = your 60 + 3600"));
        let skip = Settings {
            mode: Mode::Skip,
            ..settings()
        };
        let out = wrapped_value(SMALLEST, &skip);
        assert_eq!(
            out["TimeoutSeconds"],
            serde_json::json!(60 + 247 + 900 + 303)
        );
        // The lease limit counts every term.
        let longest = u64::from(MAX_LEASE_SECONDS) - (5148 - 60) - 900 - 300;
        let too_long = SMALLEST.replace("60", &(longest + 1).to_string());
        let refused = wrap_text(&too_long, &settings(), false).expect_err("refused");
        assert!(refused.contains("over the 31536000"), "{refused}");
        let fits = SMALLEST.replace("60", &longest.to_string());
        let out = wrapped_value(&fits, &settings());
        let payload = &out["States"]["Acquire Lock"]["Parameters"]["Payload"];
        assert_eq!(
            payload["leaseSeconds"],
            serde_json::json!(u64::from(MAX_LEASE_SECONDS))
        );
    }

    #[test]
    fn the_comment_warns_against_redrive_in_both_modes() {
        let user = SMALLEST;
        for mode in [Mode::Wait, Mode::Skip] {
            let out = wrapped_value(user, &Settings { mode, ..settings() });
            let comment = out["Comment"].as_str().expect("a Comment");
            assert!(
                comment.contains(
                    "Do not redrive an execution of this state machine: redrive re-runs \
                     only the states that did not succeed"
                ),
                "{mode:?}: {comment}"
            );
        }
    }

    /// SMALLEST in JSONata: the output keeps the language, with the lock
    /// states of statemachine/jsonata/.
    const SMALLEST_JSONATA: &str = r#"{"QueryLanguage": "JSONata", "TimeoutSeconds": 60,
        "StartAt": "A", "States": {"A": {"Type": "Pass", "Output": "{% $states.input %}", "End": true}}}"#;

    #[test]
    fn a_jsonata_definition_is_wrapped_in_the_jsonata_lock_states() {
        for mode in [Mode::Wait, Mode::Skip] {
            let path = super::super::template::LockName::InputPath("$.customer['id x']".into());
            let settings = Settings {
                mode,
                lock_name: path,
                ..settings()
            };
            let out = wrapped_value(SMALLEST_JSONATA, &settings);
            assert_eq!(out["QueryLanguage"], "JSONata", "{mode:?}");
            let acquire = &out["States"]["Acquire Lock"];
            assert!(acquire.get("Parameters").is_none(), "{acquire}");
            let payload = &acquire["Arguments"]["Payload"];
            assert!(
                payload["leaseSeconds"].is_u64(),
                "a literal lease: {payload}"
            );
            assert_eq!(
                payload["lockName"],
                "{% $states.context.Execution.Input.customer.`id x` %}"
            );
            for release in ["Release Lock", "Release Lock After Failure"] {
                let name = &out["States"][release]["Arguments"]["Payload"]["lockName"];
                assert_eq!(name, &payload["lockName"], "{release}");
            }
            let branch = &out["States"]["Run Workload Under Lock"]["Branches"][0];
            assert_eq!(branch["States"]["A"]["Output"], "{% $states.input %}");
            let text = serde_json::to_string(&out).expect("prints");
            assert!(
                !text.contains(".$\""),
                "no JSONPath field in the output: {text}"
            );
        }
        // The JSONPath output of the same definition has no JSONata states.
        let out = wrapped_value(SMALLEST, &settings());
        assert!(out.get("QueryLanguage").is_none());
        assert!(out["States"]["Acquire Lock"]["Parameters"].is_object());
    }

    #[test]
    fn lock_names_a_jsonata_definition_cannot_take_are_the_users_error() {
        let named = |lock_name| Settings {
            lock_name,
            ..settings()
        };
        let expression = super::super::template::LockName::Fixed(
            sfn_lock::LockName::new("{% $states.context.Execution.Id %}").expect("a name"),
        );
        let refused = wrap_text(SMALLEST_JSONATA, &named(expression.clone()), false)
            .expect_err("an expression as a fixed name");
        assert!(refused.starts_with("cannot wrap: "), "{refused}");
        assert!(
            refused.contains("would be a JSONata expression"),
            "{refused}"
        );
        // The same name is a plain string in JSONPath.
        assert!(wrap_text(SMALLEST, &named(expression), false).is_ok());
        let path = super::super::template::LockName::InputPath("$.a[*]".into());
        let refused = wrap_text(SMALLEST_JSONATA, &named(path), false).expect_err("a wildcard");
        assert!(
            refused.starts_with("cannot wrap: --lock-name-path"),
            "{refused}"
        );
    }

    #[test]
    fn variables_named_like_the_locks_are_refused() {
        for assign in [
            r#""Assign": {"sfnLock": 1},"#,
            r#""Catch": [{"ErrorEquals": ["States.ALL"], "Next": "A", "Assign": {"sfnLockResultPath": 2}}],"#,
        ] {
            let user = SMALLEST_JSONATA.replace(
                r#""Type": "Pass","#,
                &format!(r#""Type": "Pass", {assign}"#),
            );
            let refused = wrap_text(&user, &settings(), false).expect_err(assign);
            assert!(refused.contains("state \"A\" assigns"), "{refused}");
        }
    }

    #[test]
    fn an_asynchronous_invoke_is_refused_in_either_language() {
        let invoke = |arguments: &str| {
            format!(
                r#"{{"QueryLanguage": "JSONata", "TimeoutSeconds": 60, "StartAt": "A", "States": {{"A":
                {{"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke",
                  "Arguments": {arguments}, "End": true}}}}}}"#
            )
        };
        let plain = invoke(r#"{"FunctionName": "f", "Payload": "{% $states.input %}"}"#);
        assert!(wrap_text(&plain, &settings(), false).is_ok());
        for unsafe_arguments in [
            r#"{"FunctionName": "f", "InvocationType": "Event"}"#,
            r#"{"FunctionName": "f", "InvocationType": "{% $states.input.how %}"}"#,
            r#""{% {'FunctionName': 'f', 'InvocationType': 'Event'} %}""#,
        ] {
            let refused = wrap_text(&invoke(unsafe_arguments), &settings(), false)
                .expect_err(unsafe_arguments);
            assert!(refused.contains("state \"A\" is"), "{refused}");
        }
    }
}
