//! `sfn-lock run` when the store fails while it takes the lock: an acquire
//! whose write landed but whose answer was lost must not leave the lock held
//! for the lease, and a wait goes on through a store error. Real processes
//! against the local stack (scripts/local-stack.sh, as `make test`), through
//! support/losing_proxy.rs.

mod support;

use std::process::{Command, Output};

use support::losing_proxy::LosingProxy;
use support::{cli, scratch, table_url, unique, StatusCode};

fn run_via(proxy: &LosingProxy, flags: &[&str], lock: &str, script: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sfn-lock"))
        .arg("run")
        .args(["--store", &table_url()])
        .args(flags)
        .args([lock, "--", "sh", "-c", script])
        .env("AWS_ENDPOINT_URL_DYNAMODB", proxy.url())
        .output()
        .unwrap()
}

#[test]
fn an_acquire_that_landed_with_its_answer_lost_is_released_before_status_1() {
    let (lock, dir) = (unique("cli-lost-answer"), scratch("lost-answer"));
    let ran = dir.join("ran");
    let proxy = LosingProxy::start(usize::MAX);
    let out = run_via(&proxy, &["-n"], &lock, &format!("echo > {}", ran.display()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(proxy.lost() > 0, "the acquire's write landed: {stderr}");
    assert!(!ran.exists(), "COMMAND never ran");
    assert_eq!(
        cli(&["status", "--exit-code", &lock]).status_code(),
        3,
        "the landed grant was released: {stderr}"
    );
}

#[test]
fn a_store_error_inside_the_wait_bound_is_waited_through() {
    let (lock, dir) = (unique("cli-wait-through"), scratch("wait-through"));
    let ran = dir.join("ran");
    // Three lost answers: every attempt of one acquire call (the SDK makes
    // three), so the CLI sees one store error, then the store answers again.
    let proxy = LosingProxy::start(3);
    let out = run_via(
        &proxy,
        &["-w", "30"],
        &lock,
        &format!("echo > {}", ran.display()),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(proxy.lost(), 3, "{stderr}");
    assert!(ran.exists(), "COMMAND ran: {stderr}");
    assert_eq!(cli(&["status", "--exit-code", &lock]).status_code(), 3);
}
