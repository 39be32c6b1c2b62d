//! `sfn-lock`: the lock the Step Functions workflows take, from a shell, a
//! cron job or CI (setlock's shape: take the lock, run a command, release),
//! and the operator's commands around it. The store is the functions' own:
//! `--store URL`, else `LOCK_STORE_URL` or `LOCK_TABLE_NAME`, with the
//! standard AWS environment.

// A folder per command family: running a command under the lock, the
// operator's reads and forced release, wrapping a definition; store.rs opens
// the store the first two share; cli.rs is the command line itself.
mod cli;
mod ops;
mod run;
mod store;
mod wrap;

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};

fn main() -> ExitCode {
    let Cli { store, command } = Cli::parse();
    // The two that need no store and no runtime.
    let command = match command {
        Command::Wrap(args) => return ExitCode::from(wrap::wrap(args)),
        Command::Completions(args) => return ExitCode::from(cli::completions(args)),
        command => command,
    };
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
    let store = store.as_deref();
    let status = runtime.block_on(async {
        match command {
            Command::Run(args) => run::run(args, store).await,
            Command::Status(args) => ops::status(args, store).await,
            Command::List(args) => ops::list(args, store).await,
            Command::Release(args) => ops::release(args, store).await,
            Command::Wrap(_) | Command::Completions(_) => 2,
        }
    });
    ExitCode::from(status)
}
