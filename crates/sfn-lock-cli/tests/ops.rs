//! `sfn-lock status`, `list` and `release` as real processes against the
//! local stack (run under scripts/local-stack.sh, as `make test` does).

mod support;

use std::process::{Command, Output};

use serde_json::Value;
use support::{cli, hold, holder_of, unique};

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn json_of(output: &Output) -> Value {
    assert_eq!(output.status.code(), Some(0), "{}", stderr(output));
    serde_json::from_slice(&output.stdout).expect("JSON on stdout")
}

fn status_json(lock: &str) -> Value {
    json_of(&cli(&["status", "--json", lock]).output().unwrap())
}

#[test]
fn status_of_a_free_lock_says_free_and_exits_0() {
    let lock = unique("cli-free");
    let text = cli(&["status", &lock]).output().unwrap();
    assert_eq!(text.status.code(), Some(0));
    assert!(
        stdout(&text).contains("free (never taken)"),
        "{}",
        stdout(&text)
    );
    let json = status_json(&lock);
    assert_eq!(json["lockName"], lock.as_str());
    assert_eq!(json["held"], false);
    assert_eq!(json["holders"], serde_json::json!([]));
    assert_eq!(json["fencingToken"], Value::Null);
}

#[test]
fn status_shows_the_holder_its_lease_and_token() {
    let lock = unique("cli-held");
    hold(&lock, "arn:exec:holder", 600);
    let (owner, token) = holder_of(&lock).unwrap();
    let text = cli(&["status", &lock]).output().unwrap();
    assert_eq!(text.status.code(), Some(0));
    let out = stdout(&text);
    assert!(out.contains("held by 1"), "{out}");
    assert!(
        out.contains(&owner) && out.contains(&format!("fencing token {token}")),
        "{out}"
    );

    let json = status_json(&lock);
    assert_eq!(json["held"], true);
    assert_eq!(json["holders"][0]["owner"], owner.as_str());
    assert_eq!(json["holders"][0]["fencingToken"], token);
    assert_eq!(json["holders"][0]["live"], true);
    assert_eq!(json["fencingToken"], token);
    assert_eq!(json["queueLength"], 0);
}

/// `list` on a prefix of its own, run by `sfn-lock run` itself: while the
/// run holds the lock the listing shows it with the run's owner; after, none.
#[test]
fn list_shows_a_held_lock_with_its_owner_and_nothing_once_released() {
    let bucket = std::env::var("SFN_LOCK_BUCKET").expect("SFN_LOCK_BUCKET: run under local-stack");
    let store = format!("s3://{bucket}/{}/", unique("cli-list"));
    let lock = "nightly etl/ü";
    let list = format!(
        "{} list --store {store} --json",
        env!("CARGO_BIN_EXE_sfn-lock")
    );
    let inside = Command::new(env!("CARGO_BIN_EXE_sfn-lock"))
        .args(["run", "--store", &store, lock, "--", "sh", "-c"])
        .arg(format!("{list} && echo \"$SFN_LOCK_OWNER\""))
        .output()
        .unwrap();
    assert_eq!(inside.status.code(), Some(0), "{}", stderr(&inside));
    let out = stdout(&inside);
    let (listing, owner) = out.trim_end().rsplit_once('\n').unwrap();
    let listing: Value = serde_json::from_str(listing).unwrap();
    assert_eq!(listing["truncated"], false);
    assert_eq!(listing["locks"].as_array().unwrap().len(), 1, "{listing}");
    assert_eq!(listing["locks"][0]["lockName"], lock);
    assert_eq!(listing["locks"][0]["holders"][0]["owner"], owner);

    let after = Command::new(env!("CARGO_BIN_EXE_sfn-lock"))
        .args(["list", "--store", &store])
        .output()
        .unwrap();
    assert_eq!(after.status.code(), Some(0), "{}", stderr(&after));
    assert_eq!(stdout(&after), "no lock is held\n");
}

/// On S3 the bound counts lock documents read, free ones too: a listing cut
/// short before it reached the held lock must not say that none is held.
#[test]
fn a_listing_cut_short_by_its_bound_never_says_no_lock_is_held() {
    let bucket = std::env::var("SFN_LOCK_BUCKET").expect("SFN_LOCK_BUCKET: run under local-stack");
    let store = format!("s3://{bucket}/{}/", unique("cli-list-bound"));
    let sfn_lock = |args: &[&str]| {
        let (subcommand, rest) = args.split_first().unwrap();
        Command::new(env!("CARGO_BIN_EXE_sfn-lock"))
            .args([subcommand, "--store", &store])
            .args(rest)
            .output()
            .unwrap()
    };
    // S3 lists keys in order: the free a1..a3 come before the held zz.
    for lock in ["a1", "a2", "a3"] {
        assert_eq!(
            sfn_lock(&["run", lock, "--", "true"]).status.code(),
            Some(0)
        );
    }
    let inside = format!(
        "{} list --max 2 --store {store}",
        env!("CARGO_BIN_EXE_sfn-lock")
    );
    let out = sfn_lock(&["run", "zz", "--", "sh", "-c", &inside]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        !stdout(&out).contains("no lock is held"),
        "{}",
        stdout(&out)
    );
    assert!(
        stderr(&out).contains("there may be more held locks"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn release_without_force_refuses_explains_and_frees_nothing() {
    let lock = unique("cli-noforce");
    hold(&lock, "arn:exec:keeps", 600);
    let out = cli(&["release", &lock]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--force"), "{}", stderr(&out));
    assert_eq!(holder_of(&lock).unwrap().0, "arn:exec:keeps");
}

#[test]
fn release_force_frees_the_lock_logs_who_and_the_next_token_is_higher() {
    let lock = unique("cli-force");
    hold(&lock, "arn:exec:stuck", 600);
    let (_, token) = holder_of(&lock).unwrap();
    let out = cli(&["release", "--force", &lock]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("released"), "{}", stdout(&out));
    let log: Value = serde_json::from_str(stderr(&out).trim()).unwrap();
    assert_eq!(log["event"], "forced_release");
    assert_eq!(log["owner"], "arn:exec:stuck");
    assert_eq!(log["fencingToken"], token);
    assert!(log["by"].as_str().unwrap().contains('@'), "{log}");
    assert_eq!(holder_of(&lock), None);

    hold(&lock, "arn:exec:next", 600);
    assert!(holder_of(&lock).unwrap().1 > token);
}

#[test]
fn release_force_with_an_owner_that_holds_nothing_frees_nothing() {
    let lock = unique("cli-wrong-owner");
    hold(&lock, "arn:exec:real", 600);
    let out = cli(&["release", "--force", "--owner", "arn:exec:typo", &lock])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("arn:exec:typo does not hold")
            && stderr(&out).contains("arn:exec:real"),
        "{}",
        stderr(&out)
    );
    assert_eq!(holder_of(&lock).unwrap().0, "arn:exec:real");

    // A lock nobody ever took stays untouched: no counter appears.
    let unknown = unique("cli-unknown");
    let out = cli(&["release", "--force", "--owner", "arn:exec:x", &unknown])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let free = cli(&["release", "--force", &unknown]).output().unwrap();
    assert_eq!(free.status.code(), Some(0));
    assert!(stdout(&free).contains("not held"), "{}", stdout(&free));
    assert_eq!(status_json(&unknown)["fencingToken"], Value::Null);
}

#[test]
fn bad_input_is_one_clear_line() {
    // An invalid lock name (control character): usage, status 2.
    let out = cli(&["status", "bad\u{7}name"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("lockName"), "{}", stderr(&out));
    // An unusable store URL: status 1, naming the setting.
    for args in [
        &["status", "x"][..],
        &["list"],
        &["release", "--force", "x"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_sfn-lock"))
            .args(args)
            .args(["--store", "ftp://nowhere"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(stderr(&out).contains("LOCK_STORE_URL"), "{}", stderr(&out));
        assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    }
    // A bound out of range, an empty owner: clap's or ours, status 2.
    for args in [
        &["list", "--max", "0"][..],
        &["release", "--force", "--owner", "", "x"],
    ] {
        let out = cli(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!stderr(&out).is_empty());
    }
}
