//! Tests of `queue.rs`.

use super::*;

#[test]
fn every_hand_off_writes_a_marker_of_its_own() {
    // Two pumps handing the same place must not take each other's
    // landed write for their own (its answer lost): the nonce differs.
    let entry = Entry {
        name: format!("{ENTRY_PREFIX}{}", "0".repeat(32)),
        seq: 7,
    };
    let (first, second) = (
        entry.fresh_wake(&wake_nonce()),
        entry.fresh_wake(&wake_nonce()),
    );
    assert_ne!(first, second);
    assert!(first.starts_with("7/0/"), "{first}");
    assert!(
        first.len() + entry.wake_name().len() <= WAKE_BYTES,
        "{first}"
    );
}
