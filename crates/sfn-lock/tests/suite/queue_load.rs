//! The queue under load, through the real binaries: 6 contenders, 90
//! executions in all, each acquiring once with a task token (no polling),
//! queued ones woken by releases alone. Never two inside; every queued
//! execution is woken (a lost wake-up would leave one asleep: it waits a
//! minute, then fails); tokens rise with each grant; the lock and its queue
//! end empty.
//!
//! And the race a queue must survive, provoked 30 times: a release landing
//! between a queued acquire's refused grant and its joining the queue. The
//! acquire must then grant, or be woken; never sleep with nobody to wake it.
//!
//! Nothing is timed: the minute (ten seconds in the race) is how long a woken
//! waiter may take, far beyond any hand-off, not a measure of speed.

use crate::common;

use std::sync::{Arc, Barrier, Mutex, PoisonError};

use common::tokens::{await_outcome, mint};
use common::{client, get_item, invoke, unique};
use serde_json::{json, Value};
use sfn_lock::store::dynamodb::queue::QUEUE_LENGTH;

const CONTENDERS: usize = 6;
const EXECUTIONS_EACH: usize = 15;

#[derive(Default)]
struct State {
    inside: usize,
    tokens: Vec<u64>,
    queued: usize,
}

fn run_execution(lock: &str, owner: &str, state: &Mutex<State>) {
    let token = mint(owner);
    let event = json!({"lockName": lock, "owner": owner, "leaseSeconds": 3600,
                       "taskToken": token.as_str()});
    let answer = invoke("acquire-lock", event.to_string()).ok();
    if answer["outcome"] == "queued" {
        state.lock().unwrap_or_else(PoisonError::into_inner).queued += 1;
    }
    // Granted at once or handed over later, the task gets its grant.
    let outcome = await_outcome(&token, 60);
    assert_eq!(
        outcome["status"], "SUCCEEDED",
        "{owner} was never woken: {outcome}"
    );
    let grant: Value = serde_json::from_str(outcome["output"].as_str().unwrap()).unwrap();
    assert_eq!(grant["owner"], owner);
    {
        let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
        state.inside += 1;
        assert_eq!(state.inside, 1, "two holders at once");
        state.tokens.push(grant["fencingToken"].as_u64().unwrap());
    }
    std::thread::yield_now();
    state.lock().unwrap_or_else(PoisonError::into_inner).inside -= 1;
    // As the queued workflow releases: acquire's answer as the event.
    let released = invoke("release-lock", grant.to_string()).ok();
    assert_eq!(released["outcome"], "released", "{released}");
}

#[test]
fn queued_executions_each_run_once_alone_woken_by_releases() {
    let lock = unique("queue-load");
    let state = Arc::new(Mutex::new(State::default()));
    let contenders: Vec<_> = (0..CONTENDERS)
        .map(|contender| {
            let (lock, state) = (lock.clone(), state.clone());
            std::thread::spawn(move || {
                for execution in 0..EXECUTIONS_EACH {
                    let owner = format!("arn:exec:{lock}:{contender}-{execution}");
                    run_execution(&lock, &owner, &state);
                }
            })
        })
        .collect();
    for contender in contenders {
        if let Err(panic) = contender.join() {
            std::panic::resume_unwind(panic);
        }
    }
    let state = state.lock().unwrap_or_else(PoisonError::into_inner);
    assert_eq!(state.tokens.len(), CONTENDERS * EXECUTIONS_EACH);
    assert!(
        state.tokens.windows(2).all(|pair| pair[0] < pair[1]),
        "each grant's token is above the one before it"
    );
    assert!(state.queued > 0, "the load queued some executions");
    let item = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(async { get_item(&client().await, &lock).await })
        .expect("the lock's item");
    assert!(!item.contains_key("owner"), "the lock ends free");
    assert_eq!(
        item[QUEUE_LENGTH].as_n().unwrap(),
        "0",
        "and its queue empty"
    );
}

#[test]
fn a_release_racing_a_queued_acquire_never_leaves_it_asleep() {
    for trial in 0..30 {
        let lock = unique("queue-race");
        let (holder, waiter) = (format!("arn:exec:{lock}:a"), format!("arn:exec:{lock}:b"));
        let held = json!({"lockName": lock, "owner": holder, "leaseSeconds": 3600});
        invoke("acquire-lock", held.to_string()).ok();
        let start = Arc::new(Barrier::new(2));
        let release = {
            let (start, event) = (start.clone(), held.to_string());
            std::thread::spawn(move || {
                start.wait();
                invoke("release-lock", event).ok()
            })
        };
        let token = mint(&waiter);
        let event = json!({"lockName": lock, "owner": waiter, "leaseSeconds": 3600,
                           "taskToken": token.as_str()});
        start.wait();
        let answer = invoke("acquire-lock", event.to_string()).ok();
        assert_eq!(release.join().unwrap()["outcome"], "released");
        let outcome = await_outcome(&token, 10);
        assert_eq!(
            outcome["status"], "SUCCEEDED",
            "trial {trial}: answered {answer}, then never woken: {outcome}"
        );
    }
}
