//! Tests of `reconcile.rs`.

use super::*;

#[test]
fn only_a_standard_execution_arn_names_its_state_machine() {
    assert_eq!(
        state_machine_of("arn:aws:states:us-east-1:123456789012:execution:locked:run-1").as_deref(),
        Some("arn:aws:states:us-east-1:123456789012:stateMachine:locked")
    );
    for other in [
        "me",
        "arn:exec:first",
        "arn:aws:states:us-east-1:123456789012:express:locked:run:id",
        "arn:aws:states:us-east-1:123456789012:execution:locked:",
        "arn:aws:states:us-east-1:123456789012:execution:locked:run:extra",
    ] {
        assert_eq!(state_machine_of(other), None, "{other}");
    }
}

#[test]
fn the_scheduled_input_asks_for_a_run() {
    assert!(is_reconcile(&serde_json::json!({"sfnLockReconcile": {}})));
    assert!(!is_reconcile(
        &serde_json::json!({"sfnLockReconcile": true})
    ));
    assert!(!is_reconcile(&serde_json::json!({"Records": []})));
}
