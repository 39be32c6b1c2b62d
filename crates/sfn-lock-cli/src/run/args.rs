//! `sfn-lock run`'s flags. Where flock(1) or setlock (daemontools) has a
//! flag for the same thing, its spelling is accepted too, and the help says
//! whose it is; their other flags mean something else here (flock -s, a
//! shared lock; -u, an unlock of an open file) and are not taken.

use clap::Args;

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Lease in seconds, renewed every third of it while COMMAND runs, so it
    /// only matters if this process dies (killed, host lost): the lock is then
    /// free after at most this long. Shorter than the stack's 900 s
    /// (DefaultLeaseSeconds) on purpose: a state machine cannot renew, this can.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub lease: i64,
    /// Wait at most SECONDS for the lock, then exit as not obtained (flock -w;
    /// whole seconds; 0 tries once) [default: for ever, as flock and setlock;
    /// the stack's state machines wait MaxWaitSeconds, 3600].
    #[arg(
        short = 'w',
        long,
        visible_alias = "timeout",
        value_name = "SECONDS",
        conflicts_with = "no_wait"
    )]
    pub wait: Option<u64>,
    /// Try once; do not wait (flock -n, setlock -n).
    #[arg(
        short = 'n',
        long,
        visible_alias = "nonblock",
        overrides_with = "block"
    )]
    pub no_wait: bool,
    /// Wait for the lock: the default, and it undoes an earlier -n; the last
    /// of the two wins (setlock -N).
    #[arg(short = 'N', long, overrides_with = "no_wait")]
    block: bool,
    /// Lock not obtained: exit 0, quietly (setlock -x; for cron jobs that
    /// should skip a run).
    #[arg(
        short = 'x',
        long,
        overrides_with = "no_skip_quietly",
        conflicts_with = "conflict_exit_code"
    )]
    pub skip_quietly: bool,
    /// Lock not obtained: say so and exit non-zero, the default; undoes an
    /// earlier -x (setlock -X).
    #[arg(short = 'X', long, overrides_with = "skip_quietly")]
    no_skip_quietly: bool,
    /// Lock not obtained: exit with N instead of 111, setlock's status (flock
    /// -E; flock's own default is 1, which here means a store error).
    #[arg(short = 'E', long, value_name = "N")]
    pub conflict_exit_code: Option<u8>,
    /// How many may hold the lock at once (a semaphore).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub limit: i64,
    /// The owner to hold the lock as [default: host:pid:random].
    #[arg(long, value_name = "ID")]
    pub owner: Option<String>,
    /// Say each decision on stderr.
    #[arg(short, long)]
    pub verbose: bool,
    /// The lock's name.
    #[arg(value_name = "LOCK")]
    pub lock_name: String,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}
