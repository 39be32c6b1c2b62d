//! The real binaries started with an invalid `LOCK_STORE_URL` answer every
//! invocation with `InvalidLockRequest` naming the setting, and change
//! nothing. Ignored in a normal run: it needs a stack started with that
//! setting, which `scripts/test-other-stores.sh` (part of `make test`) starts.

use crate::common;

use common::{invoke, unique};
use serde_json::json;

#[test]
#[ignore = "needs a stack with SFN_LOCK_STORE_URL=ftp://nowhere: scripts/test-other-stores.sh"]
fn every_invocation_answers_invalid_lock_request_naming_the_setting() {
    let event = json!({"lockName": unique("misconfigured"), "owner": "arn:exec:a"}).to_string();
    for function in ["acquire-lock", "release-lock"] {
        let (error_type, cause) = invoke(function, &event).error();
        assert_eq!(error_type, "InvalidLockRequest", "{function}");
        assert_eq!(cause["field"], "LOCK_STORE_URL", "{function}: {cause}");
    }
}
