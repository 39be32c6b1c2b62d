//! `sfn-lock run` as real processes against the local stack (DynamoDB on
//! moto; run under scripts/local-stack.sh, as `make test` does).

mod support;

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

use support::{
    cli, hold, holder_of, millis_now, read_when_written, scratch, table_url, wait_at_most, Proxy,
    StatusCode,
};

#[test]
fn the_command_sees_the_lock_and_its_exit_status_passes_through() {
    let lock = support::unique("cli-status");
    let script = format!(
        "test \"$SFN_LOCK_NAME\" = '{lock}' && test -n \"$SFN_LOCK_OWNER\" && \
         test \"$SFN_LOCK_FENCING_TOKEN\" -gt 0 && exit 7"
    );
    let status = cli(&["run", &lock, "--", "sh", "-c", &script])
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(7));
    // Released when the command ended: the next run gets it at once.
    let next = cli(&["run", "-n", &lock, "--", "true"]).status().unwrap();
    assert_eq!(next.code(), Some(0));
}

#[test]
fn a_held_lock_is_not_obtained_111_or_0_with_x_or_the_chosen_status() {
    let lock = support::unique("cli-held");
    hold(&lock, "arn:exec:holder", 600);
    let out = cli(&["run", "-n", &lock, "--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(111));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("arn:exec:holder") && stderr.contains("lease until"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");

    let quiet = cli(&["run", "-n", "-x", &lock, "--", "true"])
        .output()
        .unwrap();
    assert_eq!(quiet.status.code(), Some(0));
    assert!(
        quiet.stderr.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&quiet.stderr)
    );

    let chosen = cli(&[
        "run",
        "-n",
        "--conflict-exit-code",
        "5",
        &lock,
        "--",
        "true",
    ]);
    assert_eq!(chosen.status_code(), 5);
    // A wait says once whom it waits for, then gives up at its bound.
    let waited = cli(&["run", "--wait", "1", &lock, "--", "true"])
        .output()
        .unwrap();
    assert_eq!(waited.status.code(), Some(111));
    let stderr = String::from_utf8_lossy(&waited.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(
        lines[0].contains("arn:exec:holder") && lines[0].contains("waiting (up to 1 s)"),
        "{stderr}"
    );
    assert!(lines[1].ends_with("not obtained"), "{stderr}");
}

#[test]
fn two_runs_at_once_never_overlap() {
    let (lock, dir) = (support::unique("cli-two"), scratch("two"));
    // mkdir is atomic: a second command inside at the same time fails it.
    let script = format!(
        "mkdir '{dir}/inside' || exit 99; sleep 0.5; rmdir '{dir}/inside'",
        dir = dir.display()
    );
    let runs: Vec<_> = (0..2)
        .map(|_| {
            cli(&["run", &lock, "--", "sh", "-c", &script])
                .spawn()
                .unwrap()
        })
        .collect();
    for mut run in runs {
        assert_eq!(wait_at_most(&mut run).code(), Some(0));
    }
}

#[test]
fn sigterm_is_forwarded_and_the_lock_released_after_the_command_exits() {
    let (lock, dir) = (support::unique("cli-term"), scratch("term"));
    let (ready, got) = (dir.join("ready"), dir.join("got"));
    let script = format!(
        "trap 'echo term > {got}; exit 3' TERM; echo up > {ready}; while :; do sleep 0.05; done",
        got = got.display(),
        ready = ready.display()
    );
    let mut run = cli(&["run", &lock, "--", "sh", "-c", &script])
        .spawn()
        .unwrap();
    read_when_written(&ready);
    assert!(holder_of(&lock).is_some(), "held while the command runs");
    support::signal(run.id(), libc::SIGTERM);
    assert_eq!(
        wait_at_most(&mut run).code(),
        Some(3),
        "the command's own status"
    );
    assert_eq!(read_when_written(&got), "term");
    assert_eq!(holder_of(&lock), None, "released after the command exited");
}

#[test]
fn kill_9_leaves_the_lock_until_its_lease_ends_then_a_later_run_takes_over() {
    let (lock, dir) = (support::unique("cli-kill"), scratch("kill"));
    let (token, pid) = (dir.join("token"), dir.join("pid"));
    let script = format!(
        "echo $SFN_LOCK_FENCING_TOKEN > {token}; echo $$ > {pid}; exec sleep 30",
        token = token.display(),
        pid = pid.display()
    );
    let mut run = cli(&["run", "--lease", "2", &lock, "--", "sh", "-c", &script])
        .spawn()
        .unwrap();
    let first: u64 = read_when_written(&token).parse().unwrap();
    let orphan: u32 = read_when_written(&pid).parse().unwrap();
    run.kill().unwrap(); // SIGKILL: no release, no more renewals
    wait_at_most(&mut run);
    support::signal(orphan, libc::SIGKILL);
    assert_eq!(
        cli(&["run", "-n", &lock, "--", "true"]).status_code(),
        111,
        "held until the lease ends"
    );
    let later = cli(&[
        "run",
        "--wait",
        "20",
        &lock,
        "--",
        "sh",
        "-c",
        "echo $SFN_LOCK_FENCING_TOKEN",
    ])
    .output()
    .unwrap();
    assert_eq!(later.status.code(), Some(0));
    let second: u64 = String::from_utf8_lossy(&later.stdout)
        .trim()
        .parse()
        .unwrap();
    assert!(second > first, "{second} > {first}");
}

#[test]
fn a_lease_shorter_than_the_command_is_renewed_and_keeps_its_token() {
    let (lock, dir) = (support::unique("cli-renew"), scratch("renew"));
    let token = dir.join("token");
    let script = format!(
        "echo $SFN_LOCK_FENCING_TOKEN > {}; sleep 3",
        token.display()
    );
    let mut run = cli(&["run", "--lease", "1", &lock, "--", "sh", "-c", &script])
        .spawn()
        .unwrap();
    let first: u64 = read_when_written(&token).parse().unwrap();
    // Twice the lease: without renewals it would have run out by now.
    std::thread::sleep(Duration::from_millis(2000));
    let holder = holder_of(&lock).expect("still held");
    assert_eq!(holder.1, first, "renewed with the same fencing token");
    assert_eq!(wait_at_most(&mut run).code(), Some(0));
}

#[test]
fn a_store_that_goes_away_gets_the_command_sigterm_before_the_lease_ends() {
    let (lock, dir) = (support::unique("cli-gone"), scratch("gone"));
    let (ready, got) = (dir.join("ready"), dir.join("got"));
    let proxy = Proxy::start();
    let script = format!(
        "trap 'date +%s%3N > {got}; exit 0' TERM; echo up > {ready}; while :; do sleep 0.05; done",
        got = got.display(),
        ready = ready.display()
    );
    let mut run = Command::new(env!("CARGO_BIN_EXE_sfn-lock"))
        .args([
            "run",
            "--store",
            &table_url(),
            "--lease",
            "3",
            &lock,
            "--",
            "sh",
            "-c",
            &script,
        ])
        .env("AWS_ENDPOINT_URL_DYNAMODB", proxy.url())
        .process_group(0)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = run.stderr.take().unwrap();
    read_when_written(&ready);
    let gone_at = millis_now();
    proxy.stop();
    let status = wait_at_most(&mut run);
    let stopped: i64 = read_when_written(&got).parse().unwrap();
    assert!(
        stopped < gone_at + 3000,
        "SIGTERM came {} ms after the store went, lease 3 s",
        stopped - gone_at
    );
    assert_eq!(
        status.code(),
        Some(1),
        "non-zero although the command exited 0"
    );
    let mut said = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut said).unwrap();
    let stderr = said;
    assert!(stderr.contains("protection is gone"), "{stderr}");
}

#[test]
fn bad_input_is_one_clear_line_and_runs_nothing() {
    let dir = scratch("bad");
    let ran = dir.join("ran");
    let script = format!("echo ran > {}", ran.display());
    // A lock name the contract refuses (a control character): a usage error.
    let out = cli(&["run", "bad\u{1}name", "--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("lockName") && stderr.lines().count() == 1,
        "{stderr}"
    );
    // A store URL nobody can use: status 1, before COMMAND.
    let out = Command::new(env!("CARGO_BIN_EXE_sfn-lock"))
        .args([
            "run",
            "--store",
            "ftp://nowhere",
            "lock",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("LOCK_STORE_URL") && stderr.lines().count() == 1,
        "{stderr}"
    );
    // A bad lease, and no command at all: usage errors too.
    assert_eq!(
        cli(&["run", "--lease", "0", "lock", "--", "true"]).status_code(),
        2
    );
    assert_eq!(cli(&["run", "lock"]).status_code(), 2);
    assert!(!ran.exists(), "COMMAND never ran");
}
