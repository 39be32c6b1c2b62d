//! From the text of the user's definition to the wrapped one: parse it,
//! check it (wrap_check), then build the output (wrap_build) from the
//! reviewed file filled in with the settings (wrap_template).

use serde_json::Value;

use super::build::{build, UserParts};
use super::check::{check, Rules};
use super::errors::work_may_still_run;
use super::template::{Settings, Template, WAIT_STATE, WORKLOAD_STATE};

/// A wrapped definition, and the warnings to print with it.
#[derive(Debug)]
pub(crate) struct Wrapped {
    pub(crate) definition: String,
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
    // The lock states' names, for the check; they do not depend on the
    // timeout, which the check has yet to read.
    let reviewed = Template::load(settings, 1).map_err(internal)?;
    let rules = Rules {
        lock_states: &reviewed.state_names(),
        work_may_still_run: &work_may_still_run(&reviewed.value, WORKLOAD_STATE, WAIT_STATE)
            .map_err(internal)?,
        allow_unsafe_error_handling: allow_unsafe,
        lease_extra: settings.lease_extra(),
        lease_extra_flags: settings.lease_extra_flags(),
    };
    let checked = check(&value, &rules).map_err(|reason| format!("cannot wrap: {reason}"))?;
    let execution_timeout = checked.timeout_seconds + settings.wait_seconds();
    let template = Template::load(settings, execution_timeout).map_err(internal)?;
    let parts = UserParts {
        text,
        value: &value,
        timeout_seconds: checked.timeout_seconds,
        comment: checked.comment.as_deref(),
        version: checked.version.as_deref(),
    };
    let definition = build(&template, settings, &parts).map_err(internal)?;
    Ok(Wrapped {
        definition,
        warnings: checked.warnings,
    })
}

fn internal(reason: String) -> String {
    format!("internal error, please report: {reason}")
}

#[cfg(test)]
mod tests {
    use super::super::check::MAX_LEASE_SECONDS;
    use super::super::fixtures::settings;
    use super::super::template::Mode;
    use super::*;

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
    fn the_wait_is_added_to_the_users_timeout_and_the_lease() {
        let user = SMALLEST;
        let out = wrapped_value(user, &settings());
        assert_eq!(out["TimeoutSeconds"], serde_json::json!(3660));
        assert_eq!(
            out["States"]["Acquire Lock"]["Parameters"]["Payload"]["leaseSeconds.$"],
            serde_json::json!("States.MathAdd(States.MathAdd(3660, 900), 300)")
        );
        let comment = out["Comment"].as_str().expect("a Comment");
        assert!(
            comment.contains(
                "TimeoutSeconds is this definition's own 60 plus the 3600 s it may wait for \
                 the lock (--max-wait-seconds)"
            ),
            "{comment}"
        );
        let skip = Settings {
            mode: Mode::Skip,
            ..settings()
        };
        assert_eq!(
            wrapped_value(user, &skip)["TimeoutSeconds"],
            serde_json::json!(60)
        );
        // The lease limit counts the wait too.
        let longest = MAX_LEASE_SECONDS - 3600 - 1200;
        let too_long = user.replace("60", &(longest + 1).to_string());
        let refused = wrap_text(&too_long, &settings(), false).expect_err("refused");
        assert!(
            refused.contains(
                "(--max-wait-seconds + --workload-max-run-seconds + --lease-margin-seconds)"
            ),
            "{refused}"
        );
        let fits = user.replace("60", &longest.to_string());
        assert!(wrap_text(&fits, &settings(), false).is_ok());
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
}
