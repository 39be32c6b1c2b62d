//! Tests of `request.rs`.

use super::*;
use serde_json::json;

fn field_of(result: Result<AcquireRequest, LockError>) -> String {
    match result {
        Err(LockError::InvalidRequest { field, .. }) => field,
        other => panic!("expected InvalidRequest, got {other:?}"),
    }
}

#[test]
fn accepts_a_minimal_and_a_full_event() {
    let minimal = AcquireRequest::from_event(&json!({"lockName": "etl", "owner": "me"})).unwrap();
    assert_eq!(minimal.lease_seconds, None);
    assert_eq!(minimal.wait, None);
    let full = AcquireRequest::from_event(&json!({
        "lockName": "etl", "owner": "me", "leaseSeconds": 60,
        "waitStartedAt": "2026-11-30T10:00:00Z", "maxWaitSeconds": 30,
    }))
    .unwrap();
    assert_eq!(
        full.lease_seconds,
        LeaseSeconds::new("leaseSeconds", 60).ok()
    );
    let wait = full.wait.unwrap();
    assert!(!wait.has_run_out(wait.started_at.plus_seconds(29)));
    assert!(wait.has_run_out(wait.started_at.plus_seconds(30)));
}

#[test]
fn names_the_offending_field() {
    let cases = [
        (json!([]), "event"),
        (json!({"owner": "me"}), "lockName"),
        (json!({"lockName": 7, "owner": "me"}), "lockName"),
        (
            json!({"lockName": "etl", "owner": "me", "lease_seconds": 5}),
            "lease_seconds",
        ),
        (
            json!({"lockName": "etl", "owner": "me", "leaseSeconds": 0}),
            "leaseSeconds",
        ),
        (
            json!({"lockName": "etl", "owner": "me", "leaseSeconds": 1.5}),
            "leaseSeconds",
        ),
        (
            json!({"lockName": "etl", "owner": "me", "leaseSeconds": 31_536_001}),
            "leaseSeconds",
        ),
        (
            json!({"lockName": "etl", "owner": "me", "maxWaitSeconds": 5}),
            "waitStartedAt",
        ),
        (
            json!({"lockName": "etl", "owner": "me", "maxWaitSeconds": 5, "waitStartedAt": "soon"}),
            "waitStartedAt",
        ),
    ];
    for (event, field) in cases {
        assert_eq!(
            field_of(AcquireRequest::from_event(&event)),
            field,
            "{event}"
        );
    }
}

#[test]
fn a_release_token_must_be_a_non_negative_integer() {
    for token in [json!(-1), json!(1.5), json!("3"), json!(true)] {
        let event = json!({"lockName": "etl", "owner": "me", "fencingToken": token});
        match ReleaseRequest::from_event(&event) {
            Err(LockError::InvalidRequest { field, .. }) => {
                assert_eq!(field, "fencingToken", "{token}")
            }
            other => panic!("{token}: expected InvalidRequest, got {other:?}"),
        }
    }
}

#[test]
fn a_lease_refusal_states_the_rule() {
    let refusal =
        AcquireRequest::from_event(&json!({"lockName": "etl", "owner": "me", "leaseSeconds": 0}));
    match refusal {
        Err(LockError::InvalidRequest { field, rule }) => {
            assert_eq!(field, "leaseSeconds");
            assert_eq!(rule, "must be an integer from 1 to 31536000");
        }
        other => panic!("expected InvalidRequest, got {other:?}"),
    }
}

#[test]
fn withdraw_is_a_boolean_and_off_by_default() {
    let base = json!({"lockName": "etl", "owner": "me"});
    assert!(!ReleaseRequest::from_event(&base).unwrap().withdraw);
    let with = json!({"lockName": "etl", "owner": "me", "withdraw": true});
    assert!(ReleaseRequest::from_event(&with).unwrap().withdraw);
    let bad = json!({"lockName": "etl", "owner": "me", "withdraw": "yes"});
    assert!(matches!(
        ReleaseRequest::from_event(&bad),
        Err(LockError::InvalidRequest { field, .. }) if field == "withdraw"
    ));
}

#[test]
fn release_takes_acquire_output_but_not_strangers() {
    let output = json!({
        "lockName": "etl", "owner": "me", "fencingToken": 3, "outcome": "granted",
        "acquiredAt": "2026-11-30T10:00:00Z", "expiresAt": "2026-11-30T10:15:00Z", "leaseSeconds": 900,
    });
    assert_eq!(
        ReleaseRequest::from_event(&output).unwrap().fencing_token,
        Some(3)
    );
    let without = ReleaseRequest::from_event(&json!({"lockName": "etl", "owner": "me"}));
    assert_eq!(without.unwrap().fencing_token, None);
    assert!(
        ReleaseRequest::from_event(&json!({"lockName": "etl", "owner": "me", "force": true}))
            .is_err()
    );
}
