//! The footprint a run leaves (issue 23's bound, DESIGN.md "SSM store"): once
//! every caller is done and a lock has been unchanged for the reclaim time,
//! the reconciler trims it to its newest generation and `current`. The other
//! stores keep a fixed number of items or objects per lock by construction
//! and are not counted here.

use sfn_lock::EpochMillis;

use super::fates::Fate;
use super::run::{Failure, Run};
use super::stores::Kind;

/// Trimmed after 7 minutes unchanged (`store/document/ssm/reclaim.rs`); one more for room.
const AFTER_RUN_MS: i64 = 8 * 60_000;
/// An idle lock keeps its newest generation and `current`.
const IDLE_LOCK_PARAMETERS: usize = 2;

impl Run {
    pub async fn footprint(&mut self) -> Result<(), Failure> {
        if self.kind != Kind::Ssm {
            return Ok(());
        }
        // Twice: the first pass may itself change a lock (it frees the grant
        // of an execution whose end event was lost), which the second trims.
        for _ in 0..2 {
            self.advance_to(self.now + AFTER_RUN_MS);
            let reconciler = Run::reconciler_id();
            let (sweeper, now) = (self.sweeper.clone(), EpochMillis(self.now));
            self.note(reconciler, "reconciles, every caller done");
            let handle = super::events::spawn(reconciler, &self.wire, async move {
                sweeper.reconcile(now).await
            });
            self.ops
                .insert(reconciler, super::run::Op::Reconcile(handle));
            self.drain().await?;
        }
        let names = self.parameters().await;
        let owners: Vec<&String> = names
            .iter()
            .filter(|name| name.contains("/.owners/"))
            .collect();
        for (index, (lock, _)) in self.locks.iter().enumerate() {
            let folder = format!("{}/", self.path_of(lock.as_str()));
            let kept: Vec<&String> = names
                .iter()
                .filter(|name| name.starts_with(&folder))
                .collect();
            if kept.len() > IDLE_LOCK_PARAMETERS {
                let text = format!(
                    "footprint: idle lock {index} keeps {} parameters after the reconciler trimmed it (at most {IDLE_LOCK_PARAMETERS}): {}",
                    kept.len(),
                    kept.iter().map(|n| n.rsplit('/').next().unwrap_or(n)).collect::<Vec<_>>().join(", ")
                );
                return Err(self.fail(text));
            }
        }
        let callers = self.callers.len();
        if owners.len() > callers {
            let text = format!(
                "footprint: {} owner markers left by {callers} callers that are all done: {}",
                owners.len(),
                owners
                    .iter()
                    .map(|n| n.split("/.owners/").nth(1).unwrap_or(n))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            return Err(self.fail(text));
        }
        Ok(())
    }

    /// Lands every parked request until no operation is left.
    pub async fn drain(&mut self) -> Result<(), Failure> {
        loop {
            self.settle().await?;
            self.harvest().await?;
            let parked = self.wire.take_all();
            if parked.is_empty() && self.ops.is_empty() {
                return Ok(());
            }
            for request in parked {
                self.deliver(request, Fate::Land).await?;
            }
        }
    }

    fn path_of(&self, lock_name: &str) -> String {
        format!("{}/{}", self.ssm_root(), lock_name)
    }

    pub fn ssm_root(&self) -> String {
        format!("/sfn-lock-explore/{}", self.run_id)
    }

    /// Every parameter under the run's path, read straight from the server.
    async fn parameters(&self) -> Vec<String> {
        let client = aws_sdk_ssm::Client::new(&super::stores::direct_sdk().await);
        let mut names = Vec::new();
        let mut token = None;
        loop {
            let page = client
                .get_parameters_by_path()
                .path(self.ssm_root())
                .recursive(true)
                .set_next_token(token)
                .send()
                .await
                .unwrap_or_else(|error| panic!("listing the run's parameters: {error:?}"));
            names.extend(
                page.parameters()
                    .iter()
                    .filter_map(|p| p.name().map(str::to_owned)),
            );
            token = page.next_token().map(str::to_owned);
            if token.is_none() {
                return names;
            }
        }
    }
}
