//! The logging contract of the real binaries, read from what `cargo lambda
//! watch` collected (scripts/local-stack.sh runs them with
//! AWS_LAMBDA_LOG_FORMAT=JSON): one JSON line per decision, naming the lock and
//! owner, and nothing of the event beyond the lock fields.

use crate::common;

use std::time::{Duration, Instant};

use common::{invoke, unique};
use serde_json::{json, Value};

/// The log lines that mention `needle`, once at least one has arrived (bounded:
/// the functions' output reaches the file through `cargo lambda watch`), or at
/// once with `wait` false.
fn lines_naming(needle: &str, wait: bool) -> Vec<String> {
    let path = std::env::var("SFN_LOCK_LAMBDA_LOG")
        .expect("SFN_LOCK_LAMBDA_LOG: run under scripts/local-stack.sh");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let lines: Vec<String> = text
            .lines()
            .filter(|line| line.contains(needle))
            .map(str::to_owned)
            .collect();
        if !wait || !lines.is_empty() || Instant::now() > deadline {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn one_json_line_per_decision_with_the_lock_fields_and_nothing_else_of_the_event() {
    let lock = unique("logged");
    let owner = unique("arn:exec:logged");
    // release-lock accepts acquire-lock's whole answer; its other fields are
    // data the log must not carry.
    let sentinel = unique("not-for-the-log");
    let answer = invoke(
        "release-lock",
        json!({"lockName": lock, "owner": owner, "acquiredAt": sentinel}).to_string(),
    )
    .ok();
    assert_eq!(answer["outcome"], "not_held");

    let lines = lines_naming(&lock, true);
    assert_eq!(lines.len(), 1, "one line for the one decision: {lines:#?}");
    let line: Value = serde_json::from_str(&lines[0]).expect("a JSON log line");
    assert_eq!(line["level"], "INFO");
    assert_eq!(line["fields"]["lock_name"], lock.as_str());
    assert_eq!(line["fields"]["owner"], owner.as_str());
    assert!(line["fields"]["message"].is_string());
    assert!(
        lines_naming(&sentinel, false).is_empty(),
        "the event's other fields were logged"
    );
}
