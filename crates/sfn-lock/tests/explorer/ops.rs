//! What a run keeps track of: the operations in flight, and how a run ends.

use tokio::task::JoinHandle;

pub type Answered<T> = JoinHandle<Result<T, sfn_lock::LockError>>;

pub enum Op {
    Acquire(Answered<sfn_lock::AcquireAnswer>),
    Release {
        handle: Answered<sfn_lock::ReleaseResponse>,
        /// The caller's grant was in the store, live, when the release began.
        held_at_start: bool,
        /// Landings when it began: (sweep, reconciler or operator; other callers' releases).
        landings_at_start: (usize, usize, usize),
        /// When it began (Lambda stops it a Timeout later).
        started: i64,
    },
    Reconcile(Answered<sfn_lock::sweep::reconcile::ReconcileReport>),
    Sweep {
        handle: Answered<sfn_lock::sweep::cleanup::SweepReport>,
        /// The SQS record's body, to deliver again if the sweep fails on it.
        body: String,
        receives: u32,
    },
    /// `sfn-lock release --force`: the CLI's read, then the owner-checked
    /// release of each grant read (`crates/sfn-lock-cli/src/ops.rs`).
    Force(Answered<usize>),
}

impl Op {
    pub fn is_finished(&self) -> bool {
        match self {
            Op::Acquire(h) => h.is_finished(),
            Op::Release { handle, .. } => handle.is_finished(),
            Op::Reconcile(h) => h.is_finished(),
            Op::Sweep { handle, .. } => handle.is_finished(),
            Op::Force(h) => h.is_finished(),
        }
    }

    pub fn abort(&self) {
        match self {
            Op::Acquire(h) => h.abort(),
            Op::Release { handle, .. } => handle.abort(),
            Op::Reconcile(h) => h.abort(),
            Op::Sweep { handle, .. } => handle.abort(),
            Op::Force(h) => h.abort(),
        }
    }
}

/// A broken invariant, with the run's trace and its draws (to replay or shrink).
#[derive(Debug)]
pub struct Failure {
    pub invariant: String,
    pub trace: Vec<String>,
    pub record: Vec<u64>,
}

impl Failure {
    /// The invariant's name: what a shrunk run must still break.
    pub fn kind(&self) -> &str {
        self.invariant.split(':').next().unwrap_or("")
    }
}

#[derive(Debug, Default, Clone, Copy)]
pub struct Stats {
    pub steps: usize,
    pub requests: usize,
}
