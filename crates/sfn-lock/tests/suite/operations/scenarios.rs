//! The scenarios each function runs for `operations`: between them, every
//! path whose calls the template grants (a grant, a semaphore's marker, a
//! contended lock, a queue's hand-off and wake-up, a release and its
//! hand-off, the sweep's release, deferral and reconciler). Each function's
//! clients carry its own recorder; the state each scenario starts from is
//! written by an unrecorded store on the same table, bucket prefix or path.

use std::collections::BTreeSet;
use std::sync::Arc;

use lambda_runtime::{Context, LambdaEvent};
use serde_json::{json, Value};
use sfn_lock::aws::config::{sdk_config, waker_client};
use sfn_lock::aws::executions::{SqsRequeue, StepFunctions};
use sfn_lock::lambda::{
    handle_acquire, handle_release, handle_sweep, ConfiguredLocker, ConfiguredSweeper, Payload,
    SweepFunction,
};
use sfn_lock::metrics::Metrics;
use sfn_lock::store::any::s3_client;
use sfn_lock::sweep::cleanup::Sweeper;
use sfn_lock::sweep::policy::SweepPolicy;
use sfn_lock::{
    AnyStore, DynamoStore, EpochMillis, LeaseSeconds, Locker, S3Store, SfnWaker, SsmStore,
};

use super::Recorder;
use crate::common::sfn::{queue, start, state_machine_arn, stop, LOCKED};
use crate::common::stores::bucket;
use crate::common::tokens::{close, fail_next_wakes, mint};
use crate::common::{sqs_batch, status_change, unique};

/// Where one run keeps its locks: a table, an S3 prefix or an SSM path of its
/// own, so that the reconciler's whole-store listing sees this run's alone.
async fn place(kind: &str) -> String {
    match kind {
        "dynamodb" => crate::reconcile::fresh_table().await,
        "s3" => format!("{}/", unique("operations")),
        _ => format!("/sfn-lock-test/{}", unique("operations")),
    }
}

async fn store(kind: &str, place: &str, recorder: &Recorder) -> AnyStore {
    let sdk = sdk_config().await;
    match kind {
        "dynamodb" => {
            let config =
                aws_sdk_dynamodb::config::Builder::from(&sdk).interceptor(recorder.clone());
            let waker = waker_client(&sdk)
                .config()
                .to_builder()
                .interceptor(recorder.clone());
            let waker = SfnWaker::new(aws_sdk_sfn::Client::from_conf(waker.build()));
            AnyStore::DynamoDb(
                DynamoStore::new(aws_sdk_dynamodb::Client::from_conf(config.build()), place)
                    .with_waker(Arc::new(waker)),
            )
        }
        "s3" => {
            let config = s3_client(&sdk)
                .config()
                .to_builder()
                .interceptor(recorder.clone());
            AnyStore::S3(S3Store::s3(
                aws_sdk_s3::Client::from_conf(config.build()),
                bucket(),
                place,
            ))
        }
        _ => {
            let config = aws_sdk_ssm::config::Builder::from(&sdk).interceptor(recorder.clone());
            AnyStore::Ssm(SsmStore::ssm(
                aws_sdk_ssm::Client::from_conf(config.build()),
                place,
            ))
        }
    }
}

fn locker(store: AnyStore) -> Locker<AnyStore> {
    Locker::new(
        store,
        LeaseSeconds::new("leaseSeconds", 3600).expect("a lease"),
    )
}

fn event(payload: Value) -> LambdaEvent<Payload> {
    LambdaEvent::new(Payload::Json(payload), Context::default())
}

/// Writes the state a scenario starts from, `ago` seconds in the past.
struct Seed(Locker<AnyStore>);

impl Seed {
    async fn acquire(&self, payload: Value, ago: i64) {
        let now = EpochMillis(EpochMillis::now().0 - ago * 1000);
        self.0
            .answer_within(&payload, now, None)
            .await
            .expect("the seed's acquire");
    }

    async fn release(&self, payload: Value) {
        self.0
            .release(&payload, EpochMillis::now())
            .await
            .expect("the seed's release");
    }
}

pub async fn run(kind: &str) -> Vec<(&'static str, BTreeSet<String>)> {
    let place = place(kind).await;
    let seed = Seed(locker(store(kind, &place, &Recorder::default()).await));
    let queued = kind == "dynamodb"; // S3 and SSM keep no queue
    vec![
        ("acquire-lock", acquire(kind, &place, &seed, queued).await),
        ("release-lock", release(kind, &place, &seed, queued).await),
        (
            "release-execution-locks",
            sweep(kind, &place, &seed, queued).await,
        ),
    ]
}

async fn acquire(kind: &str, place: &str, seed: &Seed, queued: bool) -> BTreeSet<String> {
    let recorder = Recorder::default();
    let function: ConfiguredLocker = Ok(locker(store(kind, place, &recorder).await));
    let (free, permit, held) = (unique("free"), unique("permit"), unique("held"));
    let _ = handle_acquire(&function, event(json!({"lockName": free, "owner": "a"}))).await;
    let _ = handle_acquire(
        &function,
        event(json!({"lockName": permit, "owner": "a", "limit": 2})),
    )
    .await;
    seed.acquire(json!({"lockName": held, "owner": "x"}), 0)
        .await;
    let _ = handle_acquire(&function, event(json!({"lockName": held, "owner": "a"}))).await;
    if queued {
        // Granted at once: the waiter's own task woken.
        let (lock, token) = (unique("queued"), mint(&unique("waiter")));
        let call = json!({"lockName": lock, "owner": "a", "taskToken": token.as_str()});
        let _ = handle_acquire(&function, event(call)).await;
        // A holder whose lease ran out, a waiter behind it: the room is the
        // waiter's, handed over (its item read, granted, woken, deleted).
        let lock = unique("owed");
        seed.acquire(json!({"lockName": lock, "owner": "x"}), 7200)
            .await;
        let token = mint(&unique("waiter"));
        let waiter = json!({"lockName": lock, "owner": "w", "taskToken": token.as_str()});
        seed.acquire(waiter, 7190).await;
        let _ = handle_acquire(&function, event(json!({"lockName": lock, "owner": "a"}))).await;
        // A queued caller granted at once whose task had ended: the grant
        // is taken back (queued.rs).
        let token = mint(&unique("ended"));
        close(&token, "timeout");
        let call = json!({"lockName": unique("taken"), "owner": "a", "taskToken": token.as_str()});
        let _ = handle_acquire(&function, event(call)).await;
        // A hand-off whose wake-up failed: a contended acquire sends it again.
        let lock = unique("resent");
        resend_owed(seed, &lock).await;
        let _ = handle_acquire(&function, event(json!({"lockName": lock, "owner": "a"}))).await;
    }
    recorder.operations()
}

async fn release(kind: &str, place: &str, seed: &Seed, queued: bool) -> BTreeSet<String> {
    let recorder = Recorder::default();
    let function: ConfiguredLocker = Ok(locker(store(kind, place, &recorder).await));
    let (held, permit, never) = (unique("held"), unique("permit"), unique("never"));
    seed.acquire(json!({"lockName": held, "owner": "x"}), 0)
        .await;
    let _ = handle_release(&function, event(json!({"lockName": held, "owner": "x"}))).await;
    seed.acquire(json!({"lockName": permit, "owner": "x", "limit": 2}), 0)
        .await;
    let call = json!({"lockName": permit, "owner": "x", "limit": 2});
    let _ = handle_release(&function, event(call)).await;
    let _ = handle_release(&function, event(json!({"lockName": never, "owner": "x"}))).await;
    if queued {
        let lock = unique("handed");
        seed.acquire(json!({"lockName": lock, "owner": "x"}), 0)
            .await;
        let token = mint(&unique("waiter"));
        seed.acquire(
            json!({"lockName": lock, "owner": "w", "taskToken": token.as_str()}),
            0,
        )
        .await;
        let _ = handle_release(&function, event(json!({"lockName": lock, "owner": "x"}))).await;
        // A waiter whose task had ended: the hand-off to it is taken back.
        let lock = unique("taken");
        seed.acquire(json!({"lockName": lock, "owner": "x"}), 0)
            .await;
        let token = mint(&unique("ended"));
        let call = json!({"lockName": lock, "owner": "w", "taskToken": token.as_str()});
        seed.acquire(call, 0).await;
        close(&token, "timeout");
        let _ = handle_release(&function, event(json!({"lockName": lock, "owner": "x"}))).await;
        // A hand-off whose wake-up failed: the next release's pump resends it.
        let lock = unique("resent");
        resend_owed(seed, &lock).await;
        let _ = handle_release(&function, event(json!({"lockName": lock, "owner": "y"}))).await;
    }
    recorder.operations()
}

/// `lock` handed to a waiter by the seed's release, its wake-up failed: the
/// hand-off's marker says a wake-up is owed.
async fn resend_owed(seed: &Seed, lock: &str) {
    seed.acquire(json!({"lockName": lock, "owner": "x"}), 0)
        .await;
    let waiter = unique("resent-waiter");
    let token = mint(&waiter);
    let call = json!({"lockName": lock, "owner": "w", "taskToken": token.as_str()});
    seed.acquire(call, 0).await;
    // Both attempts of the wake-up (the waker repeats a failed one once).
    fail_next_wakes(&waiter, 2);
    seed.release(json!({"lockName": lock, "owner": "x"})).await;
}

async fn sweeper(kind: &str, place: &str, recorder: &Recorder, grace: u32) -> ConfiguredSweeper {
    let sdk = sdk_config().await;
    let sfn = aws_sdk_sfn::config::Builder::from(&sdk)
        .interceptor(recorder.clone())
        .build();
    let sqs = aws_sdk_sqs::config::Builder::from(&sdk)
        .interceptor(recorder.clone())
        .build();
    let sweeper = Sweeper {
        store: store(kind, place, recorder).await,
        executions: StepFunctions::new(aws_sdk_sfn::Client::from_conf(sfn)),
        requeue: Some(SqsRequeue::new(
            aws_sdk_sqs::Client::from_conf(sqs),
            queue().await,
        )),
        policy: SweepPolicy {
            swept_state_machines: vec![state_machine_arn(LOCKED)],
            grace_seconds: grace,
            attached: None,
        },
    };
    Ok(SweepFunction {
        sweeper,
        metrics: Metrics::off(),
    })
}

/// An execution of LOCKED holding `locks` (name, limit), then stopped.
async fn ended_holding(seed: &Seed, locks: &[(&str, u32)]) -> String {
    let execution = start(LOCKED, &unique("ended")).await;
    for (lock, limit) in locks {
        seed.acquire(
            json!({"lockName": lock, "owner": execution, "limit": limit}),
            0,
        )
        .await;
    }
    stop(&execution).await;
    execution
}

async fn sweep(kind: &str, place: &str, seed: &Seed, queued: bool) -> BTreeSet<String> {
    let recorder = Recorder::default();
    let function = sweeper(kind, place, &recorder, 0).await;
    // An ended execution's lock, permit and (DynamoDB) lock with a waiter behind it.
    let (lock, permit, handed) = (unique("lock"), unique("permit"), unique("handed"));
    let execution = ended_holding(seed, &[(&lock, 1), (&permit, 2), (&handed, 1)]).await;
    if queued {
        let token = mint(&unique("waiter"));
        seed.acquire(
            json!({"lockName": handed, "owner": "w", "taskToken": token.as_str()}),
            0,
        )
        .await;
    }
    let batch = sqs_batch(&[status_change(&execution, "ABORTED")]);
    let _ = handle_sweep(&function, event(batch)).await;
    // An event inside the grace goes back to the queue.
    let early = sweeper(kind, place, &recorder, 3600).await;
    let execution = ended_holding(seed, &[(&unique("early"), 1)]).await;
    let _ = handle_sweep(
        &early,
        event(sqs_batch(&[status_change(&execution, "ABORTED")])),
    )
    .await;
    // The reconciler: a lock whose end event was lost.
    let lost = unique("lost");
    ended_holding(seed, &[(&lost, 1)]).await;
    let _ = handle_sweep(&function, event(json!({"sfnLockReconcile": {}}))).await;
    recorder.operations()
}
