//! The lock on SSM Parameter Store (`LOCK_STORE_URL=ssm:///PATH`). SSM can
//! create a parameter only if absent (`Overwrite=false`) but has no
//! compare-and-swap, so a lock is a sequence of generations,
//! `/PATH/<encoded name>/<generation>`, each holding the whole lock document:
//! a change creates generation N+1 after reading generation N, and of all
//! writers that read N only one can create N+1; that create is the arbiter.
//! `/PATH/<encoded name>/current` repeats the newest generation, overwritten
//! after each create: a read probes the hint's own generation and the nine
//! after it (one `GetParameters`), and lists the lock's generations when that
//! finds none, so a hint that lags, is far behind or is gone misleads nobody.
//! Old generations are deleted behind (`generations.rs`; DESIGN.md,
//! "SSM store"). A release's answer without a write is confirmed by creating
//! the next generation (`confirm`): SSM's reads may be stale.

mod calls;
mod create;
mod documents;
mod generations;
mod markers;
mod path;
mod read;
pub(crate) mod reclaim;
mod window;

pub use generations::{KEEP_SUPERSEDED_MILLIS, MAX_KEPT_GENERATIONS};
pub use path::{SsmDocuments, SsmStore, MAX_LEVELS, MAX_NAME_CHARS, MAX_VALUE_BYTES};
pub use window::SsmRead;
