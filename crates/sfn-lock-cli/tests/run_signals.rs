//! `sfn-lock run`'s signals and the status of a lost lock, as real processes
//! against the local stack (scripts/local-stack.sh, as `make test`).

mod support;

use support::{cli, read_when_written, scratch, unique, wait_at_most, StatusCode};

/// Counts the SIGINTs it gets into `count`; after the first it lingers a
/// second, long enough for a forwarded copy to arrive, then exits 7.
const COUNT_SIGINTS: &str = r#"
import signal, sys, time
ready, count = sys.argv[1], sys.argv[2]
seen = []
signal.signal(signal.SIGINT, lambda *_: seen.append(1))
open(ready, "w").write("up\n")
while not seen:
    time.sleep(0.02)
time.sleep(1)
open(count, "w").write("%d\n" % len(seen))
sys.exit(7)
"#;

/// A terminal's Ctrl-C goes to the whole foreground process group, the
/// command included: sfn-lock must not send it a second one (terraform and
/// others take a second interrupt as "stop now, ungracefully").
#[test]
fn ctrl_c_reaches_the_command_once_and_the_lock_is_released() {
    let (lock, dir) = (unique("cli-ctrl-c"), scratch("ctrl-c"));
    let (ready, count) = (dir.join("ready"), dir.join("count"));
    let (ready_arg, count_arg) = (ready.display().to_string(), count.display().to_string());
    // cli() starts sfn-lock in a process group of its own, as a shell starts
    // a foreground job: the group is what a terminal's Ctrl-C signals.
    let mut run = cli(&[
        "run",
        &lock,
        "--",
        "python3",
        "-c",
        COUNT_SIGINTS,
        &ready_arg,
        &count_arg,
    ])
    .spawn()
    .unwrap();
    read_when_written(&ready);
    // SAFETY: kill(2) on the process group this test started (its pgid is
    // the CLI's pid, process_group(0)).
    let sent = unsafe { libc::kill(-(run.id() as i32), libc::SIGINT) };
    assert_eq!(sent, 0, "killpg {}", run.id());
    assert_eq!(
        wait_at_most(&mut run).code(),
        Some(7),
        "the command's status"
    );
    assert_eq!(read_when_written(&count), "1", "SIGINTs the command saw");
    assert_eq!(
        cli(&["status", "--exit-code", &lock]).status_code(),
        3,
        "released after the command exited"
    );
}

/// `kill -TERM` on sfn-lock's pid alone still stops the command (it is
/// forwarded) and the lock is released.
#[test]
fn sigterm_to_sfn_lock_alone_stops_the_command_and_releases() {
    let (lock, dir) = (unique("cli-term-alone"), scratch("term-alone"));
    let ready = dir.join("ready");
    let script = format!("echo up > {}; exec sleep 20", ready.display());
    let mut run = cli(&["run", &lock, "--", "sh", "-c", &script])
        .spawn()
        .unwrap();
    read_when_written(&ready);
    support::signal(run.id(), libc::SIGTERM);
    assert_eq!(wait_at_most(&mut run).code(), Some(128 + libc::SIGTERM));
    assert_eq!(cli(&["status", "--exit-code", &lock]).status_code(), 3);
}

/// A lost lock is status 1, as the exit table says, whatever the command
/// did with the SIGTERM it was sent (here: died of it, which alone is 143).
#[test]
fn a_lock_lost_while_the_command_runs_is_status_1_and_left_free() {
    let (lock, dir) = (unique("cli-lost"), scratch("lost"));
    let ready = dir.join("ready");
    let script = format!("echo up > {}; exec sleep 20", ready.display());
    let mut run = cli(&["run", "--lease", "3", &lock, "--", "sh", "-c", &script])
        .spawn()
        .unwrap();
    read_when_written(&ready);
    assert_eq!(cli(&["release", "--force", &lock]).status_code(), 0);
    assert_eq!(wait_at_most(&mut run).code(), Some(1), "lost: status 1");
    assert_eq!(
        cli(&["status", "--exit-code", &lock]).status_code(),
        3,
        "free after the run"
    );
}
