//! Which ARNs a wrapped state machine calls and its role grants: wrap's
//! --help, the recipe in docs/modes.md and the stack's outputs must say
//! the same (issue 21): call the published versions, grant every version.

use std::path::Path;

use super::wrap;

fn repo_file(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// The text of the template's output `name`, through its `Value:` line.
fn output<'a>(template: &'a str, name: &str) -> &'a str {
    let outputs = &template[template.find("\nOutputs:").expect("an Outputs section")..];
    let start = outputs
        .find(&format!("\n  {name}:"))
        .unwrap_or_else(|| panic!("no output {name}"));
    let rest = &outputs[start..];
    let end = rest.find("Value:").expect("a Value");
    &rest[..rest[end..].find('\n').map_or(rest.len(), |line| end + line)]
}

#[test]
fn help_docs_and_outputs_agree_on_the_arns_to_call_and_grant() {
    let help = String::from_utf8_lossy(&wrap(&["--help"]).stdout).into_owned();
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    let recipe_doc = repo_file("docs/modes.md");
    let template = repo_file("template.yaml");
    for version in [
        "AcquireLockFunctionVersionArn",
        "ReleaseLockFunctionVersionArn",
    ] {
        assert!(help.contains(version), "--help names {version}: {help}");
        assert!(
            recipe_doc.contains(version),
            "docs/modes.md names {version}"
        );
        let value = output(&template, version);
        assert!(value.contains(".Version"), "{version}: {value}");
    }
    // Every version is granted: an execution started before an update calls its own.
    for grant in [
        "AcquireLockFunctionArn output>:*",
        "ReleaseLockFunctionArn output>:*",
    ] {
        assert!(
            recipe_doc.contains(grant),
            "docs/modes.md's IAM statement grants {grant}"
        );
    }
    assert!(
        help.contains("AcquireLockFunctionArn:*") && help.contains("ReleaseLockFunctionArn:*"),
        "--help says what to grant: {help}"
    );
    for function in ["AcquireLockFunctionArn", "ReleaseLockFunctionArn"] {
        let value = output(&template, function);
        assert!(
            value.contains(":*"),
            "{function}'s output says to grant ARN:*: {value}"
        );
    }
}
