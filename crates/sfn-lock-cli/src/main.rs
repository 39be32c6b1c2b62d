//! `sfn-lock`: the lock the Step Functions workflows take, from a shell, a
//! cron job or CI (setlock's shape: take the lock, run a command, release),
//! and the operator's commands around it. The store is the functions' own:
//! `--store URL`, else `LOCK_STORE_URL` or `LOCK_TABLE_NAME`, with the
//! standard AWS environment.

// A folder per command family: running a command under the lock, the
// operator's reads and forced release, wrapping a definition; store.rs opens
// the store the first two share.
mod ops;
mod run;
mod store;
mod wrap;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "sfn-lock", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Take LOCK_NAME, run COMMAND under it (renewing the lease), release it.
    ///
    /// Exit status: COMMAND's (128 + signal if a signal ended it); 111 if
    /// the lock was not obtained (0 with -x, N with --conflict-exit-code);
    /// 1 if the store failed before COMMAND ran, or this host's clock is
    /// more than 5 s off the store's (even with -x), or the lock was lost
    /// while it ran (COMMAND is sent SIGTERM at once); 2 for a usage error.
    Run(run::RunArgs),
    /// Show who holds LOCK_NAME: holders, their leases and fencing tokens.
    ///
    /// Exit status 0 whether the lock is held or free; 1 if the store failed.
    Status(ops::StatusArgs),
    /// List the locks that have a holder (live, or expired and not yet taken over).
    ///
    /// Reads the whole store, page by page, up to --max (DESIGN.md, "Operators' reads");
    /// on SSM at 5 requests a second, saying how long first and its progress on stderr.
    List(ops::ListArgs),
    /// Free a lock by hand (every holder, or one with --owner); needs --force.
    ///
    /// The holder is not told: stop it first (e.g. stop its execution) if it
    /// still runs. Fencing tokens keep rising: the next grant gets a higher one.
    ///
    /// Exit status 0 when freed (or nobody held it); 1 if the --owner given
    /// holds nothing (nothing is written) or the store failed; 2 without --force.
    Release(ops::ReleaseArgs),
    /// Print DEFINITION with the lock around its states (a new ASL definition).
    Wrap(wrap::WrapArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Wrap(args) = cli.command {
        return ExitCode::from(wrap::wrap(args));
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("sfn-lock: cannot start: {error}");
            return ExitCode::from(1);
        }
    };
    let status = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => run::run(args).await,
            Command::Status(args) => ops::status(args).await,
            Command::List(args) => ops::list(args).await,
            Command::Release(args) => ops::release(args).await,
            Command::Wrap(_) => 2,
        }
    });
    ExitCode::from(status)
}
