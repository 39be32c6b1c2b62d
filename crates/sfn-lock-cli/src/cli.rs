//! The command line as clap parses it: the subcommands, the global
//! `--store`, the exit-status table every `--help` ends with, and the
//! completion scripts generated from this same definition.

use std::io::Write;

use clap::{Args, CommandFactory, Parser, Subcommand};
use clap_complete::Shell;

use crate::{ops, run, wrap};

/// One table for every command, so that a script's author reads all the
/// statuses in one place (the subcommands' own --help say which are theirs).
pub const EXIT_STATUS: &str = "\
Exit status:
  0      done; run: COMMAND exited 0, or the lock was held and -x was given;
         status --exit-code: the lock is held
  1      the store failed or is misconfigured (nothing else done); run: this
         host's clock is too far off the store's, or the lock was lost while
         COMMAND ran (it was sent SIGTERM; 1 whatever it then exited with);
         release --owner: that owner holds nothing; wrap: DEFINITION cannot
         be read or wrapped
  2      usage error: a bad flag, value, lock name or owner; release without
         --force (nothing read, taken, run or written)
  3      status --exit-code: the lock is free (as systemctl is-active)
  111    run: the lock is held by others, not obtained (setlock's status;
         -E N chooses another, -x makes it 0)
  126    run: COMMAND was found but cannot be executed (the lock was released)
  127    run: COMMAND was not found (the lock was released)
  128+N  run: COMMAND was ended by signal N
  other  run: COMMAND's own exit status, passed through (pick -E N outside
         the statuses COMMAND uses to tell contention apart)";

#[derive(Parser, Debug)]
#[command(name = "sfn-lock", version, about, long_about = None, after_help = EXIT_STATUS)]
pub struct Cli {
    /// The store: dynamodb://TABLE, s3://BUCKET/PREFIX or ssm:///PATH, as the
    /// stack's LockStoreUrl output; unset or empty, LOCK_TABLE_NAME names a
    /// DynamoDB table (as for the functions). Not used by wrap.
    #[arg(long, global = true, value_name = "URL", env = "LOCK_STORE_URL")]
    pub store: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Take LOCK, run COMMAND under it (renewing the lease), release it.
    ///
    /// Exit status: COMMAND's (128 + N if signal N ended it; 126 if it cannot
    /// be executed, 127 if it is not found); 111 if the lock was not obtained
    /// (0 with -x, N with -E N); 1 if the store failed before COMMAND ran, or
    /// this host's clock is more than 4 s off the store's (even with -x), or
    /// the lock was lost while it ran (COMMAND is sent SIGTERM at once); 2
    /// for a usage error.
    // A flag given twice means it once, the last value winning, as getopt(3)
    // has it in flock and setlock: scripts build command lines from pieces.
    #[command(after_help = EXIT_STATUS, args_override_self = true)]
    Run(run::RunArgs),
    /// Show who holds LOCK: holders, their leases and fencing tokens.
    ///
    /// Exit status 0 whether the lock is held or free (with --exit-code: 0
    /// held, 3 free); 1 if the store failed; 2 for a usage error.
    #[command(after_help = EXIT_STATUS)]
    Status(ops::StatusArgs),
    /// List the locks that have a holder (live, or expired and not yet taken over).
    ///
    /// Reads the whole store, page by page, up to --max (DESIGN.md, "Operators' reads");
    /// on SSM at 5 requests a second, saying how long first and its progress on stderr.
    #[command(after_help = EXIT_STATUS)]
    List(ops::ListArgs),
    /// Free LOCK by hand (every holder, or one with --owner); needs --force.
    ///
    /// The holder is not told: stop it first (e.g. stop its execution) if it
    /// still runs. Fencing tokens keep rising: the next grant gets a higher one.
    ///
    /// Exit status 0 when freed (or nobody held it); 1 if the --owner given
    /// holds nothing (nothing is written) or the store failed; 2 without --force.
    #[command(after_help = EXIT_STATUS)]
    Release(ops::ReleaseArgs),
    /// Print DEFINITION with the lock LOCK around its states (a new ASL definition).
    Wrap(wrap::WrapArgs),
    /// Print a completion script for SHELL on stdout.
    ///
    /// bash: `sfn-lock completions bash > /etc/bash_completion.d/sfn-lock`
    /// (or source it from ~/.bashrc); zsh: write it as `_sfn-lock` into a
    /// directory of your $fpath.
    Completions(CompletionsArgs),
}

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell the script is for.
    #[arg(value_enum)]
    shell: Shell,
}

/// The script for the shell, from the very command that parses the flags;
/// written whole or not at all (a closed stdout is status 1, not a panic).
pub fn completions(args: CompletionsArgs) -> u8 {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "sfn-lock", &mut script);
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(&script).and_then(|()| stdout.flush()) {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("sfn-lock: cannot write the completion script: {error}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// clap's own checks of the definition (conflicts, groups, positionals).
    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }
}
