//! What `sfn-lock run` does while COMMAND runs: forwards signals to it,
//! keeps the lease alive, and sends it SIGTERM once the lock's protection is
//! gone, so that a command never runs on without its lock silently.

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use sfn_lock::{AcquireOutcome, AnyStore, EpochMillis, Lease, LeaseSeconds, Limit, LockStore};
use tokio::process::Command;
use tokio::signal::unix::{signal, SignalKind};
use tokio::time::{sleep, timeout, Instant};

/// What the run holds the lock with.
pub(crate) struct Held {
    pub store: AnyStore,
    pub lease: Lease,
    pub seconds: LeaseSeconds,
    pub limit: Limit,
}

/// Runs the command; forwards SIGTERM and SIGHUP to it (SIGINT and SIGQUIT
/// only if it left our process group); renews the lease; sends it SIGTERM if
/// the lease is lost. The run's exit status.
///
/// The command stays in sfn-lock's process group, as under flock(1): job
/// control works as for any foreground job (Ctrl-Z stops both, the command
/// can read the terminal). A terminal's Ctrl-C and Ctrl-\ go to that whole
/// group, the command included, so forwarding them too would deliver each
/// twice, and tools such as terraform take a second interrupt as "stop now,
/// ungracefully". sfn-lock only catches them, so that it lives on to release
/// the lock once the command has decided what to do. SIGTERM and SIGHUP are
/// forwarded: they are how a supervisor or `kill PID` stops sfn-lock alone.
pub(crate) async fn supervise(held: &Held, command: &[String]) -> u8 {
    let lease = &held.lease;
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
            // SAFETY: kill(2) on our own child's pid; it has no memory effects here.
            unsafe { libc::kill(pid, signal) };
        }
    };
    // A terminal's signal already reached a command in our group; one that
    // moved to a group of its own (setsid, a shell's job control) gets ours.
    let forward_unless_grouped = |signal: i32| {
        if let Some(pid) = pid {
            // SAFETY: getpgid(2)/getpgrp(2) read ids; no memory is touched.
            let (theirs, ours) = unsafe { (libc::getpgid(pid), libc::getpgrp()) };
            if theirs != ours {
                forward(signal);
            }
        }
    };
    let mut signals = match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
        signal(SignalKind::quit()),
    ) {
        (Ok(int), Ok(term), Ok(hup), Ok(quit)) => (int, term, hup, quit),
        _ => {
            forward(libc::SIGTERM);
            eprintln!("sfn-lock: cannot watch signals; stopped the command");
            return 1;
        }
    };
    let heartbeat = keep_alive(held);
    tokio::pin!(heartbeat);
    let mut lost = None;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            _ = signals.0.recv() => forward_unless_grouped(libc::SIGINT),
            _ = signals.1.recv() => forward(libc::SIGTERM),
            _ = signals.2.recv() => forward(libc::SIGHUP),
            _ = signals.3.recv() => forward_unless_grouped(libc::SIGQUIT),
            why = &mut heartbeat, if lost.is_none() => {
                eprintln!("sfn-lock: {why}: the lock's protection is gone, sending the command SIGTERM");
                forward(libc::SIGTERM);
                lost = Some(why);
            }
        }
    };
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
