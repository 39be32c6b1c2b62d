//! `sfn-lock run`'s signals and the status of a lost lock, as real processes
//! against the local stack (scripts/local-stack.sh, as `make test`).

mod support;

use std::fs::File;
use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use support::{cli, read_when_written, scratch, table_url, unique, wait_at_most, StatusCode};

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
/// others take a second interrupt as "stop now, ungracefully"). The Ctrl-C
/// is a real one: sfn-lock runs in a session of its own whose controlling
/// terminal is a pty, and ^C is typed on the pty's master, so the kernel
/// signals the foreground group (si_code SI_KERNEL), as a shell's terminal
/// does; a killpg(2) from this test would be a process's signal, which
/// sfn-lock forwards.
#[test]
fn ctrl_c_reaches_the_command_once_and_the_lock_is_released() {
    let (lock, dir) = (unique("cli-ctrl-c"), scratch("ctrl-c"));
    let (ready, count) = (dir.join("ready"), dir.join("count"));
    let (ready_arg, count_arg) = (ready.display().to_string(), count.display().to_string());
    let (mut master, terminal) = pty();
    let mut command = Command::new(env!("CARGO_BIN_EXE_sfn-lock"));
    command
        .args(["run", "--store", &table_url(), &lock, "--"])
        .args(["python3", "-c", COUNT_SIGINTS, &ready_arg, &count_arg])
        .stdin(Stdio::from(terminal));
    // SAFETY: setsid(2) and ioctl(2) between fork and exec, async-signal-safe
    // and touching no memory of the parent's: a session of its own (its
    // pgid is its pid, which wait_at_most's killpg relies on) whose
    // controlling terminal is stdin, the pty, with sfn-lock's group in the
    // foreground.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut run = command.spawn().unwrap();
    read_when_written(&ready);
    master.write_all(b"\x03").unwrap();
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
    drop(master);
}

/// `kill -INT PID` on sfn-lock alone (a supervisor's KillSignal=SIGINT,
/// Docker's STOPSIGNAL with sfn-lock as PID 1) is a process's signal: it is
/// forwarded, the command gets exactly one, and the lock is released after
/// it exits rather than renewed until the sender's SIGKILL.
#[test]
fn sigint_to_sfn_lock_alone_reaches_the_command_once_and_releases() {
    let (lock, dir) = (unique("cli-int-alone"), scratch("int-alone"));
    let (ready, count) = (dir.join("ready"), dir.join("count"));
    let (ready_arg, count_arg) = (ready.display().to_string(), count.display().to_string());
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
    support::signal(run.id(), libc::SIGINT);
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

/// A pty: its master, to type on, and its terminal end, to be a
/// controlling terminal (opened without becoming this test's).
fn pty() -> (File, OwnedFd) {
    let (mut master, mut terminal) = (-1, -1);
    // SAFETY: openpty(3) writes the two descriptors it opens into the two
    // ints; the name, termios and winsize pointers may be null.
    let opened = unsafe {
        libc::openpty(
            &mut master,
            &mut terminal,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(opened, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both were just opened by openpty and are owned by nothing else.
    unsafe { (File::from_raw_fd(master), OwnedFd::from_raw_fd(terminal)) }
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
