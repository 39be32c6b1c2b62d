//! The lock named as every other subcommand names it, positionally
//! (`wrap LOCK DEFINITION.json`); `--lock-name NAME`, the old spelling,
//! still works (hidden from --help), and `--lock-name-path` takes the place
//! of LOCK.

use super::{sample_path, stdout_json, wrap};

#[test]
fn the_lock_is_positional_and_the_old_flag_still_works() {
    let sample_path = sample_path();
    let sample = sample_path.to_str().expect("UTF-8");
    let positional = wrap(&["orders", sample]);
    let flagged = wrap(&["--lock-name", "orders", sample]);
    assert_eq!(stdout_json(&positional), stdout_json(&flagged));
    assert_eq!(positional.stderr, flagged.stderr);
    assert!(String::from_utf8_lossy(&positional.stdout).contains("\"orders\""));
    // Flags may come after the positionals, as with any clap command.
    let later = wrap(&["orders", sample, "--limit", "2"]);
    assert!(stdout_json(&later).to_string().contains("\"limit\":2"));
    // LOCK first and flags between, as in run.
    let between = wrap(&["orders", "--limit", "2", sample]);
    assert_eq!(stdout_json(&between), stdout_json(&later));
    // --lock-name-path in LOCK's place: DEFINITION.json is the one positional.
    let keyed = wrap(&["--lock-name-path", "$.orderId", sample]);
    assert!(stdout_json(&keyed).to_string().contains("$.orderId"));

    let help = wrap(&["--help"]);
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("wrap [OPTIONS] <LOCK> <DEFINITION.json>"),
        "{help}"
    );
    assert!(
        !help.contains("--lock-name <"),
        "the old spelling is hidden: {help}"
    );
}

#[test]
fn a_lock_given_twice_or_not_at_all_is_a_usage_error() {
    let sample_path = sample_path();
    let sample = sample_path.to_str().expect("UTF-8");
    for (args, expected) in [
        (vec![sample], "wrap needs LOCK"),
        (vec!["a", "--lock-name", "b", sample], "cannot be used with"),
        (
            vec!["a", "--lock-name-path", "$.b", sample],
            "cannot be used with",
        ),
        (vec!["", sample], "a value is required for '<LOCK>'"),
        (vec!["a\u{7}b", sample], "a lock name has 1 to 1024"),
        (vec!["a", "b", sample], "unexpected argument"),
    ] {
        let out = wrap(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(
            stderr.contains(expected),
            "{args:?}: {expected:?} in: {stderr}"
        );
    }
}
