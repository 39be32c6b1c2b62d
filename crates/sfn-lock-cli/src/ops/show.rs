//! How the operator's commands show a lock: its name quoted, a grant as a
//! line of text, a whole lock as JSON (`status` and `list` alike).

use serde_json::{json, Value};
use sfn_lock::{EpochMillis, Grant, LockView};

pub(crate) fn quoted(name: &str) -> String {
    format!("{name:?}")
}

pub(crate) fn grant_line(grant: &Grant, now: EpochMillis) -> String {
    let left = (grant.expires_at.0 - now.0) / 1000;
    let state = match grant.is_live(now) {
        true => format!("in {left} s"),
        false => format!("EXPIRED {} s ago, not yet taken over", -left),
    };
    format!(
        "{}\tfencing token {}\tacquired {}\texpires {} ({state})",
        grant.owner, grant.fencing_token, grant.acquired_at, grant.expires_at
    )
}

pub(crate) fn view_json(view: &LockView, now: EpochMillis) -> Value {
    let holders: Vec<Value> = view
        .grants
        .iter()
        .map(|grant| {
            json!({"owner": grant.owner, "fencingToken": grant.fencing_token,
                   "acquiredAt": grant.acquired_at.to_rfc3339(),
                   "expiresAt": grant.expires_at.to_rfc3339(), "live": grant.is_live(now)})
        })
        .collect();
    json!({"lockName": view.lock_name.as_str(), "held": view.is_held(now), "holders": holders,
           "fencingToken": view.fencing_token, "queueLength": view.queue_length})
}
