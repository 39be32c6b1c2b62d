//! What `sfn-lock run` does while COMMAND runs: forwards signals to it,
//! keeps the lease alive, and sends it SIGTERM once the lock's protection is
//! gone, so that a command never runs on without its lock silently.

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use sfn_lock::{AcquireOutcome, AnyStore, EpochMillis, Lease, LeaseSeconds, Limit, LockStore};
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use signal_hook::iterator::exfiltrator::WithOrigin;
use signal_hook::iterator::{Handle, SignalsInfo};
use signal_hook::low_level::siginfo::{Cause, Origin};
use tokio::process::Command;
use tokio::sync::mpsc;
use tokio::time::{sleep, timeout, Instant};

/// What the run holds the lock with.
pub(crate) struct Held {
    pub store: AnyStore,
    pub lease: Lease,
    pub seconds: LeaseSeconds,
    pub limit: Limit,
}

/// Runs the command; forwards the signals that stop a run to it unless it
/// already got them (below); renews the lease; sends it SIGTERM if the lease
/// is lost. The run's exit status.
///
/// The command stays in sfn-lock's process group, as under flock(1): job
/// control works as for any foreground job (Ctrl-Z stops both, the command
/// can read the terminal). Whether to pass a signal on is decided by who
/// sent it, as sudo does. A terminal's Ctrl-C and Ctrl-\ come from the
/// kernel (si_code SI_KERNEL) and go to the whole foreground group, the
/// command included: forwarding them would deliver each twice, and tools
/// such as terraform take a second interrupt as "stop now, ungracefully",
/// so sfn-lock only outlives them to release the lock once the command has
/// decided what to do (it forwards them to a command that moved to a group
/// of its own, which the terminal did not signal). A signal sent by a
/// process (kill(2), sigqueue: `kill -INT PID`, a supervisor's KillSignal,
/// Docker's STOPSIGNAL, timeout(1)) is forwarded, whichever it is: siginfo
/// cannot tell a kill of sfn-lock alone from one of its whole group, and a
/// dropped stop signal leaves the command running and the lock renewed
/// until the sender's SIGKILL. A process signalling the whole group (GNU
/// timeout's default, systemd's KillMode=control-group) thus reaches the
/// command twice; docs/cli.md says so.
pub(crate) async fn supervise(held: &Held, command: &[String]) -> u8 {
    let lease = &held.lease;
    // Watched before the command starts: no moment where a signal would end
    // sfn-lock by its default action with the lock held and the command on.
    let signals = match SignalsInfo::<WithOrigin>::new([SIGINT, SIGTERM, SIGHUP, SIGQUIT]) {
        Ok(signals) => signals,
        Err(error) => {
            eprintln!("sfn-lock: cannot watch signals, not running the command: {error}");
            return 1;
        }
    };
    let spawned = Command::new(&command[0])
        .args(&command[1..])
        .env("SFN_LOCK_NAME", lease.lock_name.as_str())
        .env("SFN_LOCK_OWNER", lease.owner.as_str())
        .env("SFN_LOCK_FENCING_TOKEN", lease.fencing_token.to_string())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(error) => return not_started(&command[0], &error),
    };
    let pid = child.id().and_then(|pid| i32::try_from(pid).ok());
    let forward = |signal: i32| {
        if let Some(pid) = pid {
            // SAFETY: kill(2) on our own child's pid, not yet reaped (the
            // loop below forwards only until child.wait() answers); it has
            // no memory effects here.
            unsafe { libc::kill(pid, signal) };
        }
    };
    let (sent, mut received) = mpsc::unbounded_channel();
    let watcher = Watcher::start(signals, sent);
    let heartbeat = keep_alive(held);
    tokio::pin!(heartbeat);
    let mut lost = None;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            Some(origin) = received.recv() => {
                if passes_on(&origin, pid) {
                    forward(origin.signal);
                }
            }
            why = &mut heartbeat, if lost.is_none() => {
                eprintln!("sfn-lock: {why}: the lock's protection is gone, sending the command SIGTERM");
                forward(libc::SIGTERM);
                lost = Some(why);
            }
        }
    };
    watcher.stop();
    let code = match status {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => u8::try_from(code).unwrap_or(1),
            (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(1),
            (None, None) => 1,
        },
        Err(error) => {
            eprintln!("sfn-lock: lost track of the command: {error}");
            1
        }
    };
    // A lost lock is 1 whatever the command made of our SIGTERM (died of
    // it: 143; trapped it: its own status): one status for scripts to test,
    // as the exit table says, rather than one that looks like COMMAND's.
    match lost {
        Some(_) => 1,
        None => code,
    }
}

/// Whether a signal sfn-lock got should go on to the command: not a
/// terminal's Ctrl-C or Ctrl-\ (sent by the kernel to the foreground group)
/// while the command is in our group, which the terminal signalled too;
/// every other one (SIGTERM and SIGHUP whoever sent them, anything a process
/// sent).
fn passes_on(origin: &Origin, pid: Option<i32>) -> bool {
    let from_terminal = matches!(origin.signal, SIGINT | SIGQUIT) && origin.cause == Cause::Kernel;
    if !from_terminal {
        return true;
    }
    let Some(pid) = pid else { return false };
    // SAFETY: getpgid(2)/getpgrp(2) read ids; no memory is touched.
    let (theirs, ours) = unsafe { (libc::getpgid(pid), libc::getpgrp()) };
    theirs != ours
}

/// The thread that waits for signals (signal-hook's iterator blocks) and
/// hands each, with who sent it, to the supervising task.
struct Watcher {
    handle: Handle,
    thread: std::thread::JoinHandle<()>,
}

impl Watcher {
    fn start(mut signals: SignalsInfo<WithOrigin>, to: mpsc::UnboundedSender<Origin>) -> Self {
        let handle = signals.handle();
        let thread = std::thread::spawn(move || {
            for origin in signals.forever() {
                if to.send(origin).is_err() {
                    break;
                }
            }
            // Dropping `signals` unregisters its actions; signal-hook keeps
            // its handler installed, so a signal while the lock is released
            // is ignored rather than ending sfn-lock with the lock held.
        });
        Watcher { handle, thread }
    }

    fn stop(self) {
        self.handle.close();
        let _ = self.thread.join();
    }
}

/// COMMAND could not be started: 127 if there is no such command, 126 if
/// there is one that cannot be executed (permissions, not a program, ...),
/// the shell's and flock's statuses, so a script tells the two from its own.
fn not_started(program: &str, error: &std::io::Error) -> u8 {
    let (status, what) = match error.kind() {
        std::io::ErrorKind::NotFound => (127, "not found"),
        _ => (126, "not executable"),
    };
    eprintln!("sfn-lock: cannot run {program:?}: {what} ({error})");
    status
}

/// Renews the lease every third of it; answers why, once it can no longer
/// be sure to hold the lock: another owner has it, a renewal came back as a
/// new grant (the lease had run out), or no renewal landed before the last
/// sixth of the lease.
async fn keep_alive(held: &Held) -> String {
    let lease = &held.lease;
    let seconds = u64::from(held.seconds.get());
    let every = Duration::from_millis(seconds * 1000 / 3);
    let margin = (seconds * 1000 / 6) as i64;
    let mut expires_at = lease.expires_at;
    let mut next = Instant::now() + every;
    loop {
        sleep(next.saturating_duration_since(Instant::now())).await;
        // A renewal may take no longer than the lease has left before its
        // last sixth: an unreachable store must not hold the answer back.
        let left = expires_at.0 - margin - EpochMillis::now().0;
        let renewal = held.store.acquire_with_limit(
            &lease.lock_name,
            &lease.owner,
            held.seconds,
            held.limit,
            EpochMillis::now(),
        );
        let Ok(outcome) = timeout(Duration::from_millis(left.max(0) as u64), renewal).await else {
            return format!(
                "no renewal before the lease ends at {expires_at} (the store did not answer)"
            );
        };
        match outcome {
            Ok(AcquireOutcome::Renewed(renewed))
                if renewed.fencing_token == lease.fencing_token =>
            {
                expires_at = renewed.expires_at;
                next = Instant::now() + every;
                continue;
            }
            Ok(AcquireOutcome::Held(contention)) => {
                let by = contention
                    .holders
                    .first()
                    .map(|h| h.owner.clone())
                    .unwrap_or_default();
                return format!("the lock was taken over by {by}");
            }
            Ok(other) => {
                return format!("the renewal answered {other:?}, not a renewal of the lease")
            }
            Err(error) => {
                if EpochMillis::now().0 >= expires_at.0 - margin {
                    return format!("no renewal before the lease ends at {expires_at} ({error})");
                }
                eprintln!("sfn-lock: renewal failed, trying again: {error}");
                next = Instant::now() + Duration::from_millis(250);
            }
        }
    }
}
