//! Property test: random interleavings of acquire, renew, release and clock
//! advances by several owners, run against the real server and against a
//! small reference model of the lock. They must agree on every outcome, and
//! fencing tokens must rise with every new grant.

use crate::common;

use std::sync::OnceLock;

use common::{counted_store, unique};
use proptest::prelude::*;
use sfn_lock::{
    AcquireOutcome, DynamoStore, EpochMillis, LeaseSeconds, LockName, LockStore, Owner,
    ReleaseOutcome,
};
use tokio::runtime::Runtime;

const OWNERS: usize = 3;

#[derive(Clone, Debug)]
enum Step {
    Acquire {
        owner: usize,
        lease_seconds: u32,
    },
    Release {
        owner: usize,
    },
    /// Let time pass, often across a lease's end.
    Advance {
        millis: i64,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0..OWNERS, 1_u32..=5).prop_map(|(owner, lease_seconds)| Step::Acquire { owner, lease_seconds }),
        2 => (0..OWNERS).prop_map(|owner| Step::Release { owner }),
        2 => (0_i64..=6_000).prop_map(|millis| Step::Advance { millis }),
    ]
}

/// What the lock should say, in the model's terms.
#[derive(Debug, PartialEq, Eq)]
enum Expected {
    Granted {
        expires_at: EpochMillis,
    },
    Renewed {
        expires_at: EpochMillis,
    },
    Held {
        holder: usize,
        expires_at: EpochMillis,
    },
    Released,
    NotHeld,
    HeldByOther {
        holder: usize,
    },
}

/// The reference: one optional holder with an expiry. A lapsed lease stays
/// with its owner until someone else takes it or the owner releases it.
#[derive(Default)]
struct Model {
    holder: Option<(usize, EpochMillis)>,
}

impl Model {
    fn acquire(&mut self, owner: usize, lease_seconds: u32, now: EpochMillis) -> Expected {
        let expires_at = now.plus_seconds(lease_seconds);
        match self.holder {
            Some((holder, until)) if until >= now && holder != owner => Expected::Held {
                holder,
                expires_at: until,
            },
            // A renewal never cuts the lease short, and always moves it (DESIGN.md).
            Some((holder, until)) if until >= now && holder == owner => {
                let expires_at = expires_at.max(EpochMillis(until.0 + 1));
                self.holder = Some((owner, expires_at));
                Expected::Renewed { expires_at }
            }
            _ => {
                self.holder = Some((owner, expires_at));
                Expected::Granted { expires_at }
            }
        }
    }

    fn release(&mut self, owner: usize) -> Expected {
        match self.holder {
            Some((holder, _)) if holder == owner => {
                self.holder = None;
                Expected::Released
            }
            Some((holder, _)) => Expected::HeldByOther { holder },
            None => Expected::NotHeld,
        }
    }
}

fn harness() -> &'static (Runtime, DynamoStore) {
    static HARNESS: OnceLock<(Runtime, DynamoStore)> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let runtime = Runtime::new().expect("tokio runtime");
        let (store, _) = runtime.block_on(counted_store());
        (runtime, store)
    })
}

fn owner_index(owners: &[Owner], name: &str) -> usize {
    owners
        .iter()
        .position(|owner| owner.as_str() == name)
        .expect("a known owner")
}

async fn run(steps: Vec<Step>) -> Result<(), TestCaseError> {
    let store = &harness().1;
    let lock = LockName::new(unique("model")).unwrap();
    let owners: Vec<Owner> = (0..OWNERS)
        .map(|i| Owner::new(format!("arn:exec:model-{i}")).unwrap())
        .collect();
    let mut model = Model::default();
    let mut now = EpochMillis::now();
    let mut last_token = 0_u64;
    let mut holder_token = None;

    for (index, step) in steps.into_iter().enumerate() {
        let (expected, actual) = match step {
            Step::Advance { millis } => {
                now = EpochMillis(now.0 + millis);
                continue;
            }
            Step::Acquire {
                owner,
                lease_seconds,
            } => {
                let lease = LeaseSeconds::new("leaseSeconds", i64::from(lease_seconds)).unwrap();
                let expected = model.acquire(owner, lease_seconds, now);
                let actual = match store
                    .acquire(&lock, &owners[owner], lease, now)
                    .await
                    .unwrap()
                {
                    AcquireOutcome::Granted(lease) => {
                        prop_assert!(
                            lease.fencing_token > last_token,
                            "step {index}: a new grant must raise the token"
                        );
                        last_token = lease.fencing_token;
                        holder_token = Some(lease.fencing_token);
                        Expected::Granted {
                            expires_at: lease.expires_at,
                        }
                    }
                    AcquireOutcome::Renewed(lease) => {
                        prop_assert_eq!(
                            Some(lease.fencing_token),
                            holder_token,
                            "step {}: a renewal keeps the token",
                            index
                        );
                        Expected::Renewed {
                            expires_at: lease.expires_at,
                        }
                    }
                    AcquireOutcome::Held(contention) => {
                        prop_assert_eq!(contention.holders.len(), 1);
                        let holder = &contention.holders[0];
                        prop_assert_eq!(Some(holder.fencing_token), holder_token);
                        Expected::Held {
                            holder: owner_index(&owners, &holder.owner),
                            expires_at: holder.expires_at,
                        }
                    }
                    AcquireOutcome::Queued { .. } => {
                        return Err(TestCaseError::fail("an acquire without a token queued"))
                    }
                };
                (expected, actual)
            }
            Step::Release { owner } => {
                let expected = model.release(owner);
                let actual = match store.release(&lock, &owners[owner], now).await.unwrap() {
                    ReleaseOutcome::Released => Expected::Released,
                    ReleaseOutcome::NotHeld => Expected::NotHeld,
                    ReleaseOutcome::HeldByOther(holder) => Expected::HeldByOther {
                        holder: owner_index(&owners, &holder.owner),
                    },
                };
                (expected, actual)
            }
        };
        prop_assert_eq!(actual, expected, "step {} disagrees with the model", index);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn the_store_agrees_with_the_model(steps in prop::collection::vec(step(), 1..40)) {
        harness().0.block_on(run(steps))?;
    }
}
