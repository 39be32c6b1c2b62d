//! When the sweep may free an ended execution's locks: which state machines it
//! sweeps for, how long after the end it waits, and how it finds the attach
//! variant's child. Read from the function's environment once, at cold start.

use crate::ports::executions::{ExecutionFacts, ExecutionStatus};
use crate::sweep::attach::child_execution_arn;
use crate::vocab::error::LockError;
use crate::vocab::model::{EpochMillis, MAX_LEASE_SECONDS};

/// An acquire in flight when its execution ended lands within Lambda's Init
/// phase (up to 10 s, outside the function timeout) plus the acquire
/// function's 15 s timeout: its grant time is at most this after the end. A
/// grant of the same owner made later is not the ended run's (a redriven run's,
/// or its workload renewing a lapsed lease), and the sweep leaves it alone.
pub const LATE_ACQUIRE_SECONDS: u32 = 30;

/// `SWEEP_GRACE_SECONDS` when unset: the longest a Lambda invocation can run.
pub const DEFAULT_GRACE_SECONDS: u32 = 900;

/// The attach variant's state machine and the target it runs as a child.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attached {
    pub parent_state_machine: String,
    pub target_state_machine: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SweepPolicy {
    /// `SWEPT_STATE_MACHINE_ARNS` (comma-separated, required): only executions
    /// of these state machines lose their locks to the sweep.
    pub swept_state_machines: Vec<String>,
    /// `SWEEP_GRACE_SECONDS` (default 900): nothing is released until this long
    /// after the execution, and its child, ended. A workload task that was
    /// running at the end runs on (Step Functions stops no Lambda invocation);
    /// this is its longest possible run. The template sets it to
    /// WorkloadMaxRunSeconds (at least 30: [`LATE_ACQUIRE_SECONDS`], so that an
    /// acquire in flight at the end has landed first).
    pub grace_seconds: u32,
    /// `ATTACHED_STATE_MACHINE_ARN` and `TARGET_STATE_MACHINE_ARN`, both or neither.
    pub attached: Option<Attached>,
}

/// What to do with one ended execution's locks now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Release,
    /// Look again after this many seconds.
    Defer(u32),
    /// Leave its locks alone, for the reason given.
    Skip(&'static str),
}

impl SweepPolicy {
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, LockError> {
        let swept_state_machines: Vec<String> = lookup("SWEPT_STATE_MACHINE_ARNS")
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|arn| !arn.is_empty())
            .map(str::to_owned)
            .collect();
        if swept_state_machines.is_empty()
            || swept_state_machines
                .iter()
                .any(|arn| !arn.contains(":stateMachine:"))
        {
            return Err(LockError::invalid(
                "SWEPT_STATE_MACHINE_ARNS",
                "must list the state machine ARNs whose executions the sweep may release for, comma-separated",
            ));
        }
        let grace_seconds = match lookup("SWEEP_GRACE_SECONDS") {
            None => DEFAULT_GRACE_SECONDS,
            Some(text) => text
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|seconds| *seconds <= MAX_LEASE_SECONDS)
                .ok_or_else(|| {
                    LockError::invalid(
                        "SWEEP_GRACE_SECONDS",
                        format!("must be an integer from 0 to {MAX_LEASE_SECONDS}"),
                    )
                })?,
        };
        let non_empty = |name| lookup(name).filter(|value| !value.trim().is_empty());
        let attached = match (
            non_empty("ATTACHED_STATE_MACHINE_ARN"),
            non_empty("TARGET_STATE_MACHINE_ARN"),
        ) {
            (None, None) => None,
            (Some(parent), Some(target)) if target.contains(":stateMachine:") => Some(Attached {
                parent_state_machine: parent,
                target_state_machine: target,
            }),
            _ => {
                return Err(LockError::invalid(
                    "TARGET_STATE_MACHINE_ARN",
                    "must be a state machine ARN, set together with ATTACHED_STATE_MACHINE_ARN",
                ))
            }
        };
        Ok(SweepPolicy {
            swept_state_machines,
            grace_seconds,
            attached,
        })
    }

    /// Whether executions of this state machine may lose their locks to the sweep.
    pub fn sweeps(&self, state_machine_arn: &str) -> bool {
        self.swept_state_machines
            .iter()
            .any(|swept| swept == state_machine_arn)
    }

    /// The children the attach variant may have started for this execution:
    /// one for its first run and one for each redrive (each run names its
    /// child with its own redrive count). Empty for other state machines.
    pub fn children_of(&self, execution_arn: &str, facts: &ExecutionFacts) -> Vec<String> {
        let Some(attached) = self.attached.as_ref() else {
            return Vec::new();
        };
        if facts.state_machine_arn != attached.parent_state_machine {
            return Vec::new();
        }
        (0..=facts.redrive_count)
            .filter_map(|run| {
                child_execution_arn(&attached.target_state_machine, execution_arn, run)
            })
            .collect()
    }

    /// The verdict on an execution from its facts. `ended_at` is the latest
    /// end of the execution and of its child, if any.
    pub fn verdict(
        &self,
        facts: &ExecutionFacts,
        ended_at: EpochMillis,
        now: EpochMillis,
    ) -> Verdict {
        if !self.sweeps(&facts.state_machine_arn) {
            return Verdict::Skip("its state machine is not one this sweep serves");
        }
        if facts.status != ExecutionStatus::Ended {
            return Verdict::Skip(
                "the execution is running (or running again after a redrive): its locks are its own",
            );
        }
        let release_at = ended_at.plus_seconds(self.grace_seconds);
        if now < release_at {
            let seconds = (release_at.0 - now.0 + 999) / 1000;
            return Verdict::Defer(u32::try_from(seconds).unwrap_or(u32::MAX));
        }
        Verdict::Release
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCKED: &str = "arn:aws:states:us-east-1:123456789012:stateMachine:locked";

    fn policy(pairs: &[(&str, &str)]) -> Result<SweepPolicy, LockError> {
        SweepPolicy::from_lookup(|name| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        })
    }

    fn facts(status: ExecutionStatus) -> ExecutionFacts {
        ExecutionFacts {
            state_machine_arn: LOCKED.into(),
            status,
            stop_date: Some(EpochMillis(1_000_000)),
            redrive_count: 0,
        }
    }

    fn field(result: Result<SweepPolicy, LockError>) -> String {
        match result {
            Err(LockError::InvalidRequest { field, .. }) => field,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn configuration_is_checked_field_by_field() {
        let ok = policy(&[("SWEPT_STATE_MACHINE_ARNS", &format!(" {LOCKED}, ,"))]).unwrap();
        assert_eq!(ok.swept_state_machines, vec![LOCKED.to_owned()]);
        assert_eq!(ok.grace_seconds, DEFAULT_GRACE_SECONDS);
        assert_eq!(ok.attached, None);
        assert_eq!(field(policy(&[])), "SWEPT_STATE_MACHINE_ARNS");
        assert_eq!(
            field(policy(&[("SWEPT_STATE_MACHINE_ARNS", "arn:aws:sqs:x")])),
            "SWEPT_STATE_MACHINE_ARNS"
        );
        for bad in ["-1", "soon", "31536001"] {
            let result = policy(&[
                ("SWEPT_STATE_MACHINE_ARNS", LOCKED),
                ("SWEEP_GRACE_SECONDS", bad),
            ]);
            assert_eq!(field(result), "SWEEP_GRACE_SECONDS", "{bad}");
        }
        let half = policy(&[
            ("SWEPT_STATE_MACHINE_ARNS", LOCKED),
            ("ATTACHED_STATE_MACHINE_ARN", LOCKED),
        ]);
        assert_eq!(field(half), "TARGET_STATE_MACHINE_ARN");
        let not_a_machine = policy(&[
            ("SWEPT_STATE_MACHINE_ARNS", LOCKED),
            ("ATTACHED_STATE_MACHINE_ARN", LOCKED),
            (
                "TARGET_STATE_MACHINE_ARN",
                "arn:aws:sqs:us-east-1:123456789012:queue",
            ),
        ]);
        assert_eq!(field(not_a_machine), "TARGET_STATE_MACHINE_ARN");
    }

    #[test]
    fn releases_only_an_ended_execution_of_a_swept_machine_after_the_grace() {
        let policy = policy(&[
            ("SWEPT_STATE_MACHINE_ARNS", LOCKED),
            ("SWEEP_GRACE_SECONDS", "60"),
        ])
        .unwrap();
        let ended = EpochMillis(1_000_000);
        let ended_facts = facts(ExecutionStatus::Ended);
        assert_eq!(
            policy.verdict(&ended_facts, ended, EpochMillis(1_060_000)),
            Verdict::Release
        );
        assert_eq!(
            policy.verdict(&ended_facts, ended, EpochMillis(1_059_999)),
            Verdict::Defer(1)
        );
        assert_eq!(
            policy.verdict(&ended_facts, ended, ended),
            Verdict::Defer(60)
        );
        let running = facts(ExecutionStatus::Live);
        assert!(matches!(
            policy.verdict(&running, ended, EpochMillis(9_000_000)),
            Verdict::Skip(_)
        ));
        let stranger = ExecutionFacts {
            state_machine_arn: "arn:aws:states:us-east-1:123456789012:stateMachine:other".into(),
            ..ended_facts
        };
        assert!(matches!(
            policy.verdict(&stranger, ended, EpochMillis(9_000_000)),
            Verdict::Skip(_)
        ));
    }

    #[test]
    fn only_the_attach_variants_executions_have_a_child() {
        let target = "arn:aws:states:us-east-1:123456789012:stateMachine:target";
        let attach = "arn:aws:states:us-east-1:123456789012:stateMachine:attach";
        let policy = policy(&[
            ("SWEPT_STATE_MACHINE_ARNS", &format!("{LOCKED},{attach}")),
            ("ATTACHED_STATE_MACHINE_ARN", attach),
            ("TARGET_STATE_MACHINE_ARN", target),
        ])
        .unwrap();
        let parent = "arn:aws:states:us-east-1:123456789012:execution:attach:run";
        let mut of_attach = facts(ExecutionStatus::Ended);
        of_attach.state_machine_arn = attach.into();
        of_attach.redrive_count = 1;
        let children = policy.children_of(parent, &of_attach);
        assert_eq!(
            children.len(),
            2,
            "the first run's child and the redrive's: {children:?}"
        );
        let prefix = "arn:aws:states:us-east-1:123456789012:execution:target:";
        assert!(children.iter().all(|child| child.starts_with(prefix)));
        assert!(children[0].ends_with("-0") && children[1].ends_with("-1"));
        assert!(policy
            .children_of(parent, &facts(ExecutionStatus::Ended))
            .is_empty());
    }
}
