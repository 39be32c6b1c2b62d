//! The reconciler (reconcile.rs): the sweep run on a schedule, against the
//! local stack (moto's DynamoDB and Step Functions, the local endpoint's task
//! tokens). No status event is ever sent here: each test's execution ended
//! "with its event lost". Each test but the last has a table of its own, so
//! that the reconciler's whole-table listing sees only that test's locks;
//! `now` is injected, so "how long ago it ended" is a value, not a sleep.

use crate::common;

use std::sync::Arc;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType,
};
use common::sfn::{
    delayed_messages, hold, hold_at, queue, start, stop, sweeper_on, LOCKED, STRANGER,
};
use common::tokens::{is_open, mint, woken_with};
use common::{client, invoke, unique};
use sfn_lock::aws::config::{sdk_config, waker_client};
use sfn_lock::sweep::reconcile::{ReconcileLimits, MAX_RECONCILE_LOCKS};
use sfn_lock::{
    AcquireOutcome, DynamoStore, EpochMillis, LeaseSeconds, LockName, LockStore, Owner,
    ReleaseOutcome, SfnWaker,
};

const GRACE: u32 = 60;

/// A new, empty lock table, created as template.yaml creates it.
pub(crate) async fn fresh_table() -> String {
    let name = unique("reconcile");
    let key = |attribute: &str| {
        KeySchemaElement::builder()
            .attribute_name(attribute)
            .key_type(KeyType::Hash)
            .build()
            .unwrap()
    };
    let string = |attribute: &str| {
        AttributeDefinition::builder()
            .attribute_name(attribute)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .unwrap()
    };
    client()
        .await
        .create_table()
        .table_name(&name)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(string("lockName"))
        .attribute_definitions(string("owner"))
        .key_schema(key("lockName"))
        .global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name("owner-index")
                .key_schema(key("owner"))
                .projection(
                    Projection::builder()
                        .projection_type(ProjectionType::KeysOnly)
                        .build(),
                )
                .build()
                .unwrap(),
        )
        .send()
        .await
        .expect("CreateTable on moto");
    name
}

/// A store on `table` that wakes queued waiters, as the functions' does.
async fn waking_store(table: &str) -> DynamoStore {
    let waker = SfnWaker::new(waker_client(&sdk_config().await));
    DynamoStore::new(client().await, table).with_waker(Arc::new(waker))
}

async fn holders(store: &impl LockStore, lock: &str) -> Vec<String> {
    let view = store
        .inspect(&LockName::new(lock).unwrap())
        .await
        .expect("inspect");
    view.grants.into_iter().map(|grant| grant.owner).collect()
}

#[tokio::test]
async fn an_execution_whose_end_event_was_lost_loses_its_lock_in_one_run_after_the_grace() {
    let table = fresh_table().await;
    let queue_url = queue().await;
    let sweeper = sweeper_on(waking_store(&table).await, GRACE, &queue_url).await;
    let ended = start(LOCKED, &unique("lost-event")).await;
    let lock = unique("lost-event-lock");
    hold(&sweeper.store, &lock, &ended).await;
    let stopped_at = stop(&ended).await;

    // Within the grace its workload may still run: left for the next run,
    // and nothing is re-queued (the reconciler has no event to send back).
    let early = sweeper
        .reconcile(stopped_at.plus_seconds(GRACE - 1))
        .await
        .unwrap();
    assert_eq!(
        (
            early.locks_looked_at,
            early.left_for_later,
            early.released.len()
        ),
        (1, 1, 0),
        "{early:?}"
    );
    assert_eq!(holders(&sweeper.store, &lock).await, vec![ended.clone()]);
    assert_eq!(delayed_messages(&queue_url).await, 0);

    let report = sweeper
        .reconcile(stopped_at.plus_seconds(GRACE))
        .await
        .unwrap();
    assert_eq!(report.released.len(), 1, "{report:?}");
    assert_eq!(report.released[0].lock_name, lock);
    assert_eq!(report.released[0].owner, ended);
    assert!(!report.truncated);
    assert!(holders(&sweeper.store, &lock).await.is_empty());
}

#[tokio::test]
async fn a_running_execution_and_holders_the_sweep_does_not_serve_keep_their_locks() {
    let table = fresh_table().await;
    let queue_url = queue().await;
    let sweeper = sweeper_on(waking_store(&table).await, GRACE, &queue_url).await;
    let running = start(LOCKED, &unique("running")).await;
    let stranger = start(STRANGER, &unique("stranger")).await;
    let (mine, theirs, cli) = (
        unique("running-lock"),
        unique("stranger-lock"),
        unique("cli-lock"),
    );
    hold(&sweeper.store, &mine, &running).await;
    hold(&sweeper.store, &theirs, &stranger).await;
    hold(&sweeper.store, &cli, "an-operator").await;
    stop(&stranger).await;

    let far_future = EpochMillis::now().plus_seconds(86_400);
    let report = sweeper.reconcile(far_future).await.unwrap();

    assert_eq!(report.locks_looked_at, 3, "{report:?}");
    assert!(report.released.is_empty(), "{report:?}");
    assert_eq!(report.kept, 3, "{report:?}");
    // Only the execution of a swept state machine is looked up in Step Functions.
    assert_eq!(report.executions_checked, 1, "{report:?}");
    assert_eq!(holders(&sweeper.store, &mine).await, vec![running]);
    assert_eq!(holders(&sweeper.store, &theirs).await, vec![stranger]);
    assert_eq!(
        holders(&sweeper.store, &cli).await,
        vec!["an-operator".to_owned()]
    );
}

#[tokio::test]
async fn a_queue_nobody_woke_behind_a_free_lock_is_woken() {
    let table = fresh_table().await;
    let queue_url = queue().await;
    let waking = waking_store(&table).await;
    let lock = LockName::new(unique("stuck-queue")).unwrap();
    let (holder, waiter) = (
        Owner::new("arn:exec:holder").unwrap(),
        Owner::new("arn:exec:waiter").unwrap(),
    );
    let lease = LeaseSeconds::new("leaseSeconds", 600).unwrap();
    let now = EpochMillis::now();
    let granted = waking.acquire(&lock, &holder, lease, now).await.unwrap();
    assert!(matches!(granted, AcquireOutcome::Granted(_)), "{granted:?}");
    let token = mint(waiter.as_str());
    let queued = waking
        .acquire_or_queue(
            &lock,
            &waiter,
            lease,
            sfn_lock::Limit::ONE,
            &token.clone().into(),
            now,
        )
        .await
        .unwrap();
    assert!(
        matches!(queued, AcquireOutcome::Queued { .. }),
        "{queued:?}"
    );

    // The release that frees the lock has no waker (the function that made
    // it could not reach Step Functions): the waiter sleeps behind a free lock.
    let deaf = DynamoStore::new(client().await, table.as_str());
    let released = deaf.release(&lock, &holder, now).await.unwrap();
    assert_eq!(released, ReleaseOutcome::Released);
    assert!(is_open(&token), "nobody woke the waiter yet");

    let sweeper = sweeper_on(waking, GRACE, &queue_url).await;
    let report = sweeper.reconcile(now.plus_seconds(1)).await.unwrap();

    assert_eq!(report.queues_woken, vec![lock.to_string()], "{report:?}");
    let output = woken_with(&token);
    assert_eq!(output["owner"], waiter.as_str());
    assert_eq!(
        holders(&sweeper.store, lock.as_str()).await,
        vec![waiter.to_string()]
    );
}

#[tokio::test]
async fn a_run_stops_at_its_caps_and_says_it_was_truncated() {
    let table = fresh_table().await;
    let queue_url = queue().await;
    let sweeper = sweeper_on(waking_store(&table).await, GRACE, &queue_url).await;
    let now = EpochMillis::now();
    // One more lock than a run looks at (held by operators: nothing to describe).
    for n in 0..=MAX_RECONCILE_LOCKS {
        hold_at(&sweeper.store, &format!("capped-{n}"), "an-operator", now).await;
    }
    let report = sweeper.reconcile(now).await.unwrap();
    assert_eq!(report.locks_looked_at, MAX_RECONCILE_LOCKS, "{report:?}");
    assert!(report.truncated, "{report:?}");

    // The DescribeExecution cap: three running executions, two calls allowed.
    let table = fresh_table().await;
    let sweeper = sweeper_on(waking_store(&table).await, GRACE, &queue_url).await;
    for n in 0..3 {
        let execution = start(LOCKED, &unique("capped-run")).await;
        hold(&sweeper.store, &format!("described-{n}"), &execution).await;
    }
    let limits = ReconcileLimits {
        describes: 2,
        ..ReconcileLimits::default()
    };
    let report = sweeper.reconcile_within(now, None, limits).await.unwrap();
    assert_eq!(
        (report.locks_looked_at, report.executions_checked),
        (3, 2),
        "{report:?}"
    );
    assert!(report.truncated, "{report:?}");
    let whole = sweeper.reconcile(now).await.unwrap();
    assert_eq!(
        (whole.executions_checked, whole.truncated),
        (3, false),
        "{whole:?}"
    );
}

#[test]
fn the_sweep_binary_answers_the_schedules_input_with_a_report() {
    // The real release-execution-locks, over the local Invoke API, on the
    // stack's shared table, with the schedule's fixed Input (template.yaml,
    // ReconcileSchedule). A lock of a running execution stays.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (running, lock) = runtime.block_on(async {
        let running = start("sfn-lock-locked", &unique("e2e-running")).await;
        let lock = unique("e2e-reconcile");
        let store = DynamoStore::new(client().await, common::table_name());
        hold(&store, &lock, &running).await;
        (running, lock)
    });

    let report = invoke("release-execution-locks", r#"{"sfnLockReconcile": {}}"#).ok();

    for field in [
        "locksLookedAt",
        "executionsChecked",
        "kept",
        "leftForLater",
        "failed",
    ] {
        assert!(report[field].is_u64(), "{field} in {report}");
    }
    assert!(report["released"].is_array(), "{report}");
    assert!(report["queuesWoken"].is_array(), "{report}");
    assert!(report["truncated"].is_boolean(), "{report}");
    assert!(report["locksLookedAt"].as_u64() >= Some(1), "{report}");
    assert!(
        report.get("batchItemFailures").is_none(),
        "not a sweep report: {report}"
    );
    let still = runtime.block_on(async {
        let store = DynamoStore::new(client().await, common::table_name());
        holders(&store, &lock).await
    });
    assert_eq!(still, vec![running]);
}

#[tokio::test]
async fn a_reconciler_runs_future_fits_a_threads_stack() {
    // A run awaits many store calls; inline, their futures made one run's
    // future 90 KB in a debug build, and the test above, three runs in one
    // body, overflowed a 2 MiB test-thread stack in CI. The store calls are
    // boxed (sweep/wake_queues.rs, bounded); this keeps them so.
    let table = fresh_table().await;
    let queue_url = queue().await;
    let sweeper = sweeper_on(waking_store(&table).await, GRACE, &queue_url).await;
    let run = sweeper.reconcile(EpochMillis::now());
    let bytes = std::mem::size_of_val(&run);
    assert!(
        bytes < 32 * 1024,
        "a reconciler run's future is {bytes} bytes"
    );
}
