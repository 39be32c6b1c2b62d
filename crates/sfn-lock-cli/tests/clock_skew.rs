//! `sfn-lock run` measures this host's clock against the store's own `Date`
//! before it takes a lock, and refuses beyond its bound (4 s). The binary
//! runs against the local stack; only the `Date` of the answers is moved, by
//! a proxy in front of the server (support/date_proxy.rs). Run under
//! scripts/local-stack.sh.

mod support;

use std::process::{Command, Output};

use serde_json::Value;
use support::date_proxy::DateProxy;
use support::{holder_of, scratch, table_url, unique, Proxy};

/// `sfn-lock run --store STORE [FLAGS] LOCK -- sh -c SCRIPT`, every store's
/// endpoint the proxy at `endpoint`.
fn run_via(endpoint: &str, store: &str, flags: &[&str], lock: &str, script: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sfn-lock"))
        .args(["run", "--store", store])
        .args(flags)
        .args([lock, "--", "sh", "-c", script])
        .env("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
        .env("AWS_ENDPOINT_URL_S3", endpoint)
        .env("AWS_ENDPOINT_URL_SSM", endpoint)
        .output()
        .unwrap()
}

/// The one JSON line the CLI logged about the clock.
fn clock_line(stderr: &str) -> Value {
    let lines: Vec<Value> = stderr
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|json| json["event"] == "clock_skew")
        .collect();
    assert_eq!(lines.len(), 1, "one clock_skew line: {stderr}");
    lines[0].clone()
}

/// The number of seconds the error line gives before " s behind" or " s ahead".
fn seconds_said(line: &str, direction: &str) -> f64 {
    let before = line
        .split_once(&format!(" s {direction}"))
        .unwrap_or_else(|| panic!("no \"s {direction}\" in {line}"))
        .0;
    before.rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn a_clock_beyond_the_bound_is_refused_on_every_store_and_nothing_is_written() {
    let bucket = std::env::var("SFN_LOCK_BUCKET").expect("SFN_LOCK_BUCKET: run under local-stack");
    let cases = [
        // The service 10 minutes ahead: this host is behind.
        (table_url(), 600, "GetItem"),
        // The service 10 minutes behind: this host is ahead.
        (table_url(), -600, "GetItem"),
        (
            format!("s3://{bucket}/{}/", unique("cli-clock")),
            600,
            "HEAD /",
        ),
        (
            format!("ssm:///sfn-lock/{}", unique("cli-clock")),
            -600,
            "AmazonSSM.GetParameter",
        ),
    ];
    for (store, shift, read) in cases {
        let (lock, dir) = (unique("cli-clock"), scratch("clock"));
        let ran = dir.join("ran");
        let proxy = DateProxy::start(shift);
        let out = run_via(
            &proxy.url(),
            &store,
            &["-n", "-x"],
            &lock,
            &format!("echo ran > {}", ran.display()),
        );
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        // Status 1 even with -x: a wrong clock is no "lock not obtained".
        assert_eq!(out.status.code(), Some(1), "{store} {shift}: {stderr}");
        assert!(!ran.exists(), "{store}: COMMAND never ran");
        // Only the read reached the store (up to three times, for a
        // tighter measurement): nothing was written.
        let requests = proxy.requests();
        assert!((1..=3).contains(&requests.len()), "{store}: {requests:?}");
        assert!(
            requests.iter().all(|r| r.contains(read)),
            "{store}: {requests:?}"
        );
        assert_eq!(proxy.rewritten(), requests.len(), "{store}");

        let json = clock_line(&stderr);
        assert_eq!(json["decision"], "refused", "{json}");
        assert_eq!(json["store"], store.as_str(), "{json}");
        assert_eq!(json["boundMillis"], 4000, "{json}");
        let ahead = json["hostAheadMillis"].as_i64().unwrap();
        assert!(
            (ahead + shift * 1000).abs() < 10_000,
            "{store}: measured {ahead} ms, the proxy moved the Date {shift} s"
        );
        // The last line is for a person: the skew, the store, the bound, the fix.
        let line = stderr.lines().last().unwrap();
        let direction = if shift > 0 { "behind" } else { "ahead" };
        let said = seconds_said(line, direction);
        assert!((said - shift.abs() as f64).abs() < 10.0, "{line}");
        for part in [store.as_str(), "4 s", "NTP"] {
            assert!(line.contains(part), "{part:?} in {line}");
        }

        // The lock is still free: its status, read without the proxy.
        let status = Command::new(env!("CARGO_BIN_EXE_sfn-lock"))
            .args(["status", "--store", &store, "--json", &lock])
            .output()
            .unwrap();
        assert_eq!(status.status.code(), Some(0), "{status:?}");
        let view: Value = serde_json::from_slice(&status.stdout).unwrap();
        assert_eq!(view["held"], false, "{store}: {view}");
    }
}

#[test]
fn a_clock_within_the_bound_runs_and_says_so_with_verbose() {
    for shift in [1, -1] {
        let (lock, dir) = (unique("cli-clock-ok"), scratch("clock-ok"));
        let ran = dir.join("ran");
        let proxy = DateProxy::start(shift);
        let script = format!("echo ran > {}", ran.display());
        let out = run_via(&proxy.url(), &table_url(), &["-v"], &lock, &script);
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(0), "{shift}: {stderr}");
        assert!(ran.exists(), "{shift}: COMMAND ran");
        assert!(proxy.rewritten() > 0, "the answers came through the proxy");
        let json = clock_line(&stderr);
        assert_eq!(json["decision"], "accepted", "{json}");
        let ahead = json["hostAheadMillis"].as_i64().unwrap();
        assert!(
            (ahead + shift * 1000).abs() < 10_000,
            "measured {ahead} ms, the proxy moved the Date {shift} s"
        );
        assert_eq!(holder_of(&lock), None, "released after the command");

        // Without --verbose an accepted clock says nothing.
        let quiet = run_via(&proxy.url(), &table_url(), &[], &lock, "true");
        assert_eq!(quiet.status.code(), Some(0));
        assert!(quiet.stderr.is_empty(), "{quiet:?}");
    }
}

#[test]
fn a_store_that_cannot_be_asked_the_time_is_the_store_error_and_runs_nothing() {
    let (lock, dir) = (unique("cli-clock-gone"), scratch("clock-gone"));
    let ran = dir.join("ran");
    let proxy = Proxy::start();
    proxy.stop(); // connections refused: no answer, no Date
    let out = run_via(
        &proxy.url(),
        &table_url(),
        &["-n", "-x"],
        &lock,
        &format!("echo ran > {}", ran.display()),
    );
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!ran.exists(), "COMMAND never ran");
    let json = clock_line(&stderr);
    assert_eq!(json["decision"], "store_failed", "{json}");
    let line = stderr.lines().last().unwrap();
    assert!(line.contains("the store failed"), "{line}");
}
