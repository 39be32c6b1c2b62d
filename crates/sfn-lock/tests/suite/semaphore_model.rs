//! Property test: the semaphore against a reference model, for limits 1 to 4
//! (one per case; 1 is the mutex format). Random acquires, renewals, releases,
//! clock advances (often to a lease's last live millisecond or one past it)
//! and cleanup sweeps run on the real server and in the model, which must agree
//! on every answer: holders, expiries, tokens (rising with each grant, kept by
//! a renewal), the mutex's last release. After every step the item must record
//! exactly the model's holders, live and expired, `holderCount` must count its
//! permits, and no more than `limit` may be present.
//!
//! The model: a live holder's acquire renews; fewer than `limit` live holders
//! admit a grant; else the live ones are named. An expired grant stays (its
//! owner may still release it) until a grant needs its place: the mutex
//! overwrites it; a semaphore acquire whose first write fails (the caller has
//! an expired permit, or `limit` permits are present) prunes every expired
//! permit (`decide` takes up to 16; six owners leave fewer). Each semaphore
//! acquire leaves a marker the sweep finds until a release of the permit.

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use common::{client, get_item, table_name, unique};
use proptest::prelude::*;
use sfn_lock::store::dynamodb::permits::permit_names;
use sfn_lock::{
    AcquireOutcome, Contention, DynamoStore, EpochMillis, Holder, Lease, LeaseSeconds, Limit,
    LockName, LockStore, Owner, ReleaseOutcome, StoreError,
};
use tokio::runtime::Runtime;

const OWNERS: usize = 6;

#[derive(Clone, Debug)]
enum Step {
    /// Owner, lease seconds.
    Acquire(usize, u32),
    Release(usize),
    /// Milliseconds.
    Advance(i64),
    /// To the first live lease's last live millisecond, or (`true`) one past it.
    ToExpiry(bool),
    /// `locks_held_by`, then `release_granted_before(now)` for each lock found.
    Sweep(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0..OWNERS, 10_u32..=60).prop_map(|(owner, lease)| Step::Acquire(owner, lease)),
        2 => (0..OWNERS).prop_map(Step::Release),
        2 => (0_i64..=20_000).prop_map(Step::Advance),
        1 => any::<bool>().prop_map(Step::ToExpiry),
        1 => (0..OWNERS).prop_map(Step::Sweep),
    ]
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Grant {
    token: u64,
    acquired_at: EpochMillis,
    expires_at: EpochMillis,
}

/// One case: the lock and its owners, the clock, and the model.
struct Case {
    lock: LockName,
    owners: Vec<Owner>,
    limit: Limit,
    now: EpochMillis,
    /// Present on the item, live or expired.
    holders: Holders,
    /// Sweep markers (semaphore only).
    markers: [bool; OWNERS],
    /// The mutex's last release: owner and token.
    last_release: Option<(usize, u64)>,
    last_token: u64,
}

impl Case {
    fn holder(&self, (owner, grant): (usize, Grant)) -> Holder {
        let release = self.last_release.filter(|_| self.limit.is_mutex());
        Holder {
            owner: self.owners[owner].to_string(),
            fencing_token: grant.token,
            expires_at: grant.expires_at,
            last_release: release.map(|(by, token)| (self.owners[by].to_string(), token)),
        }
    }

    fn lease(&self, owner: usize) -> Lease {
        let grant = self.holders[&owner];
        Lease {
            lock_name: self.lock.clone(),
            owner: self.owners[owner].clone(),
            fencing_token: grant.token,
            acquired_at: grant.acquired_at,
            expires_at: grant.expires_at,
        }
    }

    /// The answer to an acquire, applied to the model; a grant's token is 0
    /// here, as only the store knows it.
    fn expect_acquire(&mut self, owner: usize, expires_at: EpochMillis) -> AcquireOutcome {
        let now = self.now;
        let is_live = |grant: &Grant| grant.expires_at >= now;
        self.markers[owner] |= !self.limit.is_mutex();
        if let Some(mine) = self.holders.get_mut(&owner).filter(|grant| is_live(grant)) {
            // A renewal never cuts the lease short, and always moves it (DESIGN.md).
            mine.expires_at = expires_at.max(EpochMillis(mine.expires_at.0 + 1));
            return AcquireOutcome::Renewed(self.lease(owner));
        }
        let live_holders = live(&self.holders, now);
        let limit = self.limit.get() as usize;
        if live_holders.len() >= limit {
            let mut holders: Vec<Holder> =
                live_holders.into_iter().map(|h| self.holder(h)).collect();
            by_expiry(&mut holders);
            let limit = self.limit;
            return AcquireOutcome::Held(Contention { limit, holders });
        }
        // GRANT / GRANT_PERMIT fails here; the mutex overwrites an expired
        // holder, `decide` prunes every expired permit.
        if self.limit.is_mutex() || self.holders.contains_key(&owner) || self.holders.len() >= limit
        {
            self.holders.retain(|_, grant| is_live(grant));
        }
        let grant = Grant {
            token: 0,
            acquired_at: now,
            expires_at,
        };
        self.holders.insert(owner, grant);
        AcquireOutcome::Granted(self.lease(owner))
    }

    fn expect_release(&mut self, owner: usize) -> ReleaseOutcome {
        if let Some(grant) = self.holders.remove(&owner) {
            self.markers[owner] = false;
            self.last_release = Some((owner, grant.token));
            return ReleaseOutcome::Released;
        }
        match self.holders.iter().next() {
            // Only the mutex names who holds it instead.
            Some((&other, &grant)) if self.limit.is_mutex() => {
                ReleaseOutcome::HeldByOther(self.holder((other, grant)))
            }
            _ => ReleaseOutcome::NotHeld,
        }
    }

    async fn step(&mut self, step: Step) -> Result<(), TestCaseError> {
        let (store, now) = (&harness().1, self.now);
        match step {
            Step::Advance(millis) => self.now = EpochMillis(now.0 + millis),
            Step::ToExpiry(past) => {
                let expiries = live(&self.holders, now)
                    .into_iter()
                    .map(|(_, g)| g.expires_at);
                if let Some(first) = expiries.min() {
                    self.now = EpochMillis(first.0 + i64::from(past));
                }
            }
            Step::Acquire(owner, lease_seconds) => {
                let lease = LeaseSeconds::new("leaseSeconds", i64::from(lease_seconds)).unwrap();
                let mut expected = self.expect_acquire(owner, now.plus_seconds(lease_seconds));
                let mut actual = store
                    .acquire_with_limit(&self.lock, &self.owners[owner], lease, self.limit, now)
                    .await
                    .map_err(failed)?;
                match (&mut expected, &mut actual) {
                    (AcquireOutcome::Granted(model), AcquireOutcome::Granted(granted)) => {
                        let token = granted.fencing_token;
                        prop_assert!(token > self.last_token, "token fell: {granted:?}");
                        (model.fencing_token, self.last_token) = (token, token);
                        self.holders.get_mut(&owner).unwrap().token = token;
                    }
                    (_, AcquireOutcome::Held(contention)) => {
                        let holders = &mut contention.holders;
                        let sorted = holders
                            .windows(2)
                            .all(|w| w[0].expires_at <= w[1].expires_at);
                        prop_assert!(sorted, "holders not by expiry");
                        by_expiry(holders);
                    }
                    _ => {}
                }
                prop_assert_eq!(actual, expected);
            }
            Step::Release(owner) => {
                let expected = self.expect_release(owner);
                let actual = store
                    .release_with_limit(&self.lock, &self.owners[owner], self.limit, now)
                    .await
                    .map_err(failed)?;
                prop_assert_eq!(actual, expected);
            }
            Step::Sweep(owner) => {
                let found = store
                    .locks_held_by(&self.owners[owner])
                    .await
                    .map_err(failed)?;
                let finds = match self.limit.is_mutex() {
                    true => self.holders.contains_key(&owner),
                    false => self.markers[owner],
                };
                let expected: Vec<_> = finds.then(|| self.lock.clone()).into_iter().collect();
                prop_assert_eq!(&found, &expected, "locks_held_by");
                for name in &found {
                    let expected = self.expect_release(owner);
                    let actual = store
                        .release_granted_before(name, &self.owners[owner], now, now)
                        .await
                        .map_err(failed)?;
                    prop_assert_eq!(actual, expected, "the sweep's release");
                }
                // With the item equal to the model (checked next): the store's too.
                prop_assert!(!self.holders.contains_key(&owner), "swept, yet a holder");
            }
        }
        self.check_item().await
    }

    async fn check_item(&self) -> Result<(), TestCaseError> {
        let item = get_item(&harness().2, self.lock.as_str())
            .await
            .unwrap_or_default();
        let on_item = recorded(&item, &self.owners, self.limit)?;
        let live_count = live(&on_item, self.now).len();
        let within = live_count <= self.limit.get() as usize;
        prop_assert!(within, "{live_count} live holders");
        prop_assert_eq!(&on_item, &self.holders, "the item's holders");
        if self.last_token > 0 {
            prop_assert_eq!(number(&item, "fencingToken")? as u64, self.last_token);
        }
        Ok(())
    }
}

fn by_expiry(holders: &mut [Holder]) {
    holders.sort_by(|a, b| (a.expires_at, &a.owner).cmp(&(b.expires_at, &b.owner)));
}

fn failed(error: StoreError) -> TestCaseError {
    TestCaseError::fail(format!("store error: {error}"))
}

type Item = HashMap<String, AttributeValue>;
/// Owner index -> grant.
type Holders = BTreeMap<usize, Grant>;

fn live(holders: &Holders, now: EpochMillis) -> Vec<(usize, Grant)> {
    let live = holders.iter().filter(|(_, grant)| grant.expires_at >= now);
    live.map(|(owner, grant)| (*owner, *grant)).collect()
}

fn number(item: &Item, key: &str) -> Result<i64, TestCaseError> {
    item.get(key)
        .and_then(|value| value.as_n().ok())
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| TestCaseError::fail(format!("`{key}` is not a number in {item:?}")))
}

fn grant_in(fields: &Item, token: i64) -> Result<Grant, TestCaseError> {
    Ok(Grant {
        token: token as u64,
        acquired_at: EpochMillis(number(fields, "acquiredAt")?),
        expires_at: EpochMillis(number(fields, "expiresAt")?),
    })
}

fn index_of(owners: &[Owner], value: Option<&AttributeValue>) -> Result<usize, TestCaseError> {
    let name = value.and_then(|value| value.as_s().ok());
    owners
        .iter()
        .position(|owner| Some(owner.as_str()) == name.map(String::as_str))
        .ok_or_else(|| TestCaseError::fail(format!("unknown owner {value:?}")))
}

/// The holders the item records, live or expired, after checking its layout.
fn recorded(item: &Item, owners: &[Owner], limit: Limit) -> Result<Holders, TestCaseError> {
    let prefixed = |prefix: &str| item.keys().filter(|name| name.starts_with(prefix)).count();
    let (permits, tokens) = (prefixed("permit:"), prefixed("token:"));
    let count = item
        .get("holderCount")
        .map_or(Ok(0), |_| number(item, "holderCount"))?;
    let counted = count == permits as i64 && tokens == permits;
    prop_assert!(counted, "holderCount or tokens: {item:?}");
    prop_assert!(permits <= limit.get() as usize, "over the limit: {item:?}");
    // One limit, one format: the mutex writes no permits, a semaphore no `owner`.
    let one_format = match limit.is_mutex() {
        true => permits == 0,
        false => !item.contains_key("owner"),
    };
    prop_assert!(one_format, "formats mixed: {item:?}");
    let mut holders = BTreeMap::new();
    if item.contains_key("owner") {
        let grant = grant_in(item, number(item, "fencingToken")?)?;
        holders.insert(index_of(owners, item.get("owner"))?, grant);
    }
    for (name, value) in item.iter().filter(|(name, _)| name.starts_with("permit:")) {
        let fields = value
            .as_m()
            .map_err(|_| TestCaseError::fail(name.clone()))?;
        let owner = index_of(owners, fields.get("owner"))?;
        let (permit_name, token_name) = permit_names(owners[owner].as_str());
        prop_assert_eq!(name, &permit_name, "a permit named after another owner");
        holders.insert(owner, grant_in(fields, number(item, &token_name)?)?);
    }
    Ok(holders)
}

fn harness() -> &'static (Runtime, DynamoStore, Client) {
    static HARNESS: OnceLock<(Runtime, DynamoStore, Client)> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let runtime = Runtime::new().expect("tokio runtime");
        let client = runtime.block_on(client());
        let store = DynamoStore::new(client.clone(), table_name());
        (runtime, store, client)
    })
}

async fn run(limit: u32, steps: Vec<Step>) -> Result<(), TestCaseError> {
    let name = unique("sem-model");
    let mut case = Case {
        // The case's own owners: the owner index finds this case's lock only.
        owners: (0..OWNERS)
            .map(|i| Owner::new(format!("arn:exec:{name}:{i}")).unwrap())
            .collect(),
        lock: LockName::new(name).unwrap(),
        limit: Limit::new("limit", i64::from(limit)).unwrap(),
        now: EpochMillis::now(),
        holders: BTreeMap::new(),
        markers: [false; OWNERS],
        last_release: None,
        last_token: 0,
    };
    for (index, step) in steps.into_iter().enumerate() {
        let at = case.now.0;
        case.step(step.clone()).await.map_err(|error| match error {
            TestCaseError::Fail(why) => {
                TestCaseError::fail(format!("step {index} {step:?} at {at}: {why}"))
            }
            reject => reject,
        })?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn the_semaphore_agrees_with_the_model(limit in 1_u32..=4, steps in prop::collection::vec(step(), 1..40)) {
        harness().0.block_on(run(limit, steps))?;
    }
}
