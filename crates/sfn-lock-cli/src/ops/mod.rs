//! The operator's commands: `status` and `list` read (nothing is written),
//! `release --force` frees a lock by hand through the same owner-checked
//! release the functions use, so the fencing counter keeps rising.

// One file per command, and how they all show a lock.
mod list;
mod release;
mod show;
mod status;

use sfn_lock::LockName;

pub use list::{list, ListArgs};
pub use release::{release, ReleaseArgs};
pub use status::{status, StatusArgs};

/// One line on stderr, named like every message of the CLI.
pub(crate) fn say(text: impl std::fmt::Display) {
    eprintln!("sfn-lock: {text}");
}

/// The lock name argument, by the library's rule; a bad one is a usage error.
pub(crate) fn lock_name(text: &str) -> Result<LockName, u8> {
    LockName::new(text).map_err(|error| {
        say(error);
        2
    })
}

/// The store (or opening it) failed: said, and status 1.
pub(crate) fn fail(why: String) -> u8 {
    say(why);
    1
}
