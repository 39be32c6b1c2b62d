//! The invariants, checked after every step: at most `limit` believers per
//! lock, fencing tokens that only rise, honest answers. A broken one is the
//! run's failure, named by the first line of its text.

use std::collections::{BTreeMap, BTreeSet};

use sfn_lock::LockView;

use super::callers::Caller;

#[derive(Debug, Default)]
pub struct Tokens {
    /// Per lock: the highest token seen, and every (owner, token) grant seen.
    seen: BTreeMap<usize, (u64, BTreeSet<(String, u64)>)>,
    /// Per lock: the grants in the last read, and those gone since.
    present: BTreeMap<usize, BTreeSet<(String, u64)>>,
    gone: BTreeMap<usize, BTreeSet<(String, u64)>>,
}

/// Never more than `limit` callers that believe they hold a live grant.
/// A grant an operator forced out does not count: its holder is not told
/// (`release --force` says so before it acts).
pub fn limit(
    callers: &[Caller],
    forced: &[(String, u64)],
    lock: usize,
    limit: u32,
    store_now: i64,
) -> Result<(), String> {
    let believers: Vec<String> = callers
        .iter()
        .filter(|caller| caller.lock == lock)
        .filter_map(|caller| {
            caller
                .believes_live(store_now)
                .filter(|belief| !forced.contains(&(caller.owner.clone(), belief.token)))
                .map(|belief| format!("c{} (token {})", caller.id, belief.token))
        })
        .collect();
    if believers.len() > limit as usize {
        return Err(format!(
            "limit: {} callers believe they hold lock {lock} (limit {limit}): {}",
            believers.len(),
            believers.join(", ")
        ));
    }
    Ok(())
}

/// A live grant its holder believes in stays in the store until the holder
/// lets it go: nobody's write frees it, not even a call of the same owner
/// Step Functions gave up on. An operator's forced release is the exception.
pub fn held(
    callers: &[Caller],
    forced: &[(String, u64)],
    lock: usize,
    view: &LockView,
    store_now: i64,
) -> Result<(), String> {
    for caller in callers.iter().filter(|caller| caller.lock == lock) {
        let Some(belief) = caller.believes_live(store_now) else {
            continue;
        };
        if !forced.contains(&(caller.owner.clone(), belief.token))
            && kept(view, &caller.owner, belief.token).is_none()
        {
            return Err(format!(
                "held: c{}'s live grant of lock {lock} (token {}) was freed while it worked",
                caller.id, belief.token
            ));
        }
    }
    Ok(())
}

impl Tokens {
    /// A grant not seen before must carry a higher token than every earlier one.
    pub fn rise(&mut self, lock: usize, view: &LockView) -> Result<(), String> {
        // A grant that was gone (freed or taken over) never comes back: a
        // stalled writer re-creating an old state would show as one.
        let now: BTreeSet<(String, u64)> = view
            .grants
            .iter()
            .map(|grant| (grant.owner.clone(), grant.fencing_token))
            .collect();
        let gone = self.gone.entry(lock).or_default();
        if let Some(back) = now.intersection(gone).next() {
            return Err(format!(
                "tokens: lock {lock}'s grant of token {} to {} came back after it was gone",
                back.1,
                short(&back.0)
            ));
        }
        let before = self.present.insert(lock, now.clone()).unwrap_or_default();
        gone.extend(before.difference(&now).cloned());
        let (highest, seen) = self.seen.entry(lock).or_default();
        let mut fresh: Vec<_> = view
            .grants
            .iter()
            .filter(|grant| !seen.contains(&(grant.owner.clone(), grant.fencing_token)))
            .collect();
        fresh.sort_by_key(|grant| grant.fencing_token);
        for grant in fresh {
            if grant.fencing_token <= *highest {
                return Err(format!(
                    "tokens: lock {lock} granted token {} to {} after token {} was given",
                    grant.fencing_token,
                    short(&grant.owner),
                    highest
                ));
            }
            *highest = grant.fencing_token;
            seen.insert((grant.owner.clone(), grant.fencing_token));
        }
        Ok(())
    }
}

/// The grant (`owner`, `token`) as the store keeps it: its expiry, if recorded.
pub fn kept(view: &LockView, owner: &str, token: u64) -> Option<i64> {
    view.grants
        .iter()
        .find(|grant| grant.owner == owner && grant.fencing_token == token)
        .map(|grant| grant.expires_at.0)
}

/// `…:run-c3` → `c3`.
pub fn short(owner: &str) -> &str {
    owner.rsplit('-').next().unwrap_or(owner)
}
