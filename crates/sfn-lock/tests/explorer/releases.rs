//! A finished release call's answer, taken in as Step Functions would, and
//! checked for honesty against the store and who else touched the lock.

use sfn_lock::LockError;

use super::answers::RETRY_MS;
use super::callers::Phase;
use super::checks;
use super::run::{Failure, Run};

impl Run {
    pub async fn took_release(
        &mut self,
        id: usize,
        answer: Result<Result<sfn_lock::ReleaseResponse, LockError>, tokio::task::JoinError>,
        held_at_start: bool,
        landings_at_start: (usize, usize, usize),
    ) -> Result<(), Failure> {
        if self.callers[id].aborted {
            return Ok(());
        }
        let now = self.now;
        match answer {
            Ok(Ok(response)) => {
                self.note(id, format!("release answered {}", response.outcome));
                if let Some(belief) = self.callers[id].belief {
                    let view = self.inspect(self.callers[id].lock).await;
                    let still = checks::kept(&view, &self.callers[id].owner, belief.token);
                    if response.released && still.is_some_and(|expires| expires > now) {
                        return Err(self.fail(format!("honest: c{id} was answered released, but its grant (token {}) is still in the store", belief.token)));
                    }
                    let live = belief.expires_at > now + super::callers::SKEW_BOUND_MS;
                    let (system, releases, lost) = self.landings_besides(id);
                    let touched = system > landings_at_start.0;
                    // DESIGN.md, "Release records": the lock keeps one release
                    // record, so another release landing between this call's
                    // landed attempt and the SDK's retry of it makes the retry
                    // answer `not_held`. Documented, and excused here only then.
                    let overwritten = releases > landings_at_start.1 && lost > landings_at_start.2;
                    // DESIGN.md: "a release-lock invocation retried by Step
                    // Functions" finds the grant its earlier call freed: `not_held`.
                    let retried =
                        self.orphaned_releases.remove(&id) && response.outcome == "not_held";
                    if !response.released
                        && held_at_start
                        && live
                        && !touched
                        && !overwritten
                        && !retried
                    {
                        return Err(self.fail(format!("honest: c{id}'s release answered {} although its live grant (token {}) was freed by nobody else", response.outcome, belief.token)));
                    }
                }
                let caller = &mut self.callers[id];
                caller.belief = None;
                if caller.cycles_left > 0 {
                    caller.cycles_left -= 1;
                    if caller.cli {
                        // Each `sfn-lock run` is an owner of its own.
                        caller.owner = format!("{}-s{}", caller.owner, caller.cycles_left);
                    }
                    caller.phase = Phase::Acquire;
                    caller.failures = 0;
                    caller.tokens_used += 1;
                    caller.wait_started = now;
                    caller.ready_at = now + 1000;
                } else {
                    caller.phase = Phase::Done("released");
                    self.ended(id, "SUCCEEDED");
                }
            }
            Ok(Err(_)) | Err(_) if self.callers[id].cli => {
                // The CLI does not retry a release: the lease ends the grant.
                self.note(
                    id,
                    "release failed; the CLI exits, its grant left to its lease",
                );
                self.callers[id].phase = Phase::Done("exited");
            }
            Ok(Err(error)) => {
                self.note(
                    id,
                    format!(
                        "release failed: {}; Step Functions retries",
                        error.error_type()
                    ),
                );
                self.callers[id].ready_at = now + RETRY_MS;
            }
            Err(_) => {
                self.note(id, "release died; Step Functions retries");
                self.callers[id].ready_at = now + RETRY_MS;
            }
        }
        Ok(())
    }
}
