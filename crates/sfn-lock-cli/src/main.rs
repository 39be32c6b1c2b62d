//! `sfn-lock`: the lock the Step Functions workflows take, from a shell, a
//! cron job or CI (setlock's shape: take the lock, run a command, release).
//! The store is the functions' own: `--store URL`, else `LOCK_STORE_URL` or
//! `LOCK_TABLE_NAME`, with the standard AWS environment.

mod run;

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
    /// 1 if the store failed before COMMAND ran, or the lock was lost while
    /// it ran (COMMAND is sent SIGTERM at once); 2 for a usage error.
    Run(run::RunArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
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
    let status = match cli.command {
        Command::Run(args) => runtime.block_on(run::run(args)),
    };
    ExitCode::from(status)
}
