//! The library's log lines, captured in process as JSON (the binaries' own
//! format, lambda/logging.rs), for tests of "one line per decision" on paths
//! the binaries cannot be driven into (a store that hangs).
//!
//! One global subscriber for the whole test binary, writing into the buffer
//! of the test on whose thread a line is logged: per-thread subscribers
//! (`set_default`) race on tracing's global per-callsite cache when tests run
//! in parallel, and a line can go missing (seen here once).

use std::cell::RefCell;
use std::io::Write;
use std::sync::{Arc, Mutex, Once};

use serde_json::Value;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;

type Buffer = Arc<Mutex<Vec<u8>>>;

thread_local! {
    static CAPTURING: RefCell<Option<Buffer>> = const { RefCell::new(None) };
}

/// The lines sfn_lock logged on this thread while it lived.
pub struct Captured(Buffer);

impl Captured {
    /// Captures this thread's sfn_lock lines (INFO and up) until dropped: a
    /// `#[tokio::test]` runs the whole test on its own thread.
    pub fn start() -> Captured {
        static GLOBAL: Once = Once::new();
        GLOBAL.call_once(|| {
            let subscriber = tracing_subscriber::fmt()
                .json()
                .with_writer(ToThisThread)
                .finish()
                .with(Targets::new().with_target("sfn_lock", LevelFilter::INFO));
            // Fails only if another subscriber is global: then nothing is
            // captured and the tests that count lines fail, saying so.
            let _ = tracing::subscriber::set_global_default(subscriber);
        });
        let buffer = Buffer::default();
        CAPTURING.with(|slot| *slot.borrow_mut() = Some(buffer.clone()));
        Captured(buffer)
    }

    pub fn lines(&self) -> Vec<Value> {
        let bytes = self.0.lock().map(|bytes| bytes.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes)
            .lines()
            .map(|line| serde_json::from_str(line).expect("a JSON log line"))
            .collect()
    }
}

impl Drop for Captured {
    fn drop(&mut self) {
        CAPTURING.with(|slot| *slot.borrow_mut() = None);
    }
}

/// Writes to the capturing test's buffer, or nowhere.
struct ToThisThread;

impl Write for ToThisThread {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        CAPTURING.with(|slot| {
            if let Some(Ok(mut bytes)) = slot.borrow().as_ref().map(|buffer| buffer.lock()) {
                bytes.extend_from_slice(buf);
            }
        });
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for ToThisThread {
    type Writer = ToThisThread;

    fn make_writer(&'a self) -> Self::Writer {
        ToThisThread
    }
}
