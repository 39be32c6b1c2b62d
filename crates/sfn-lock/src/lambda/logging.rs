//! The functions' log lines: JSON or text, as Lambda's logging controls ask.

use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::vocab::error::LockError;

/// Logs as Lambda's advanced logging controls ask: JSON when
/// `AWS_LAMBDA_LOG_FORMAT=JSON`, level from `AWS_LAMBDA_LOG_LEVEL` (or `RUST_LOG`).
/// The runtime's own TRACE output holds whole events, so it is capped at DEBUG:
/// logs never carry more of an event than the lock fields. The runtime also
/// logs every error response at ERROR; the handler has already logged each
/// decision once at its own level, so that echo is turned off (a panic still
/// reaches stderr through the panic hook).
pub fn init_logging() {
    let level = std::env::var("AWS_LAMBDA_LOG_LEVEL")
        .or_else(|_| std::env::var("RUST_LOG"))
        .ok()
        .and_then(|text| text.parse::<LevelFilter>().ok())
        .unwrap_or(LevelFilter::INFO);
    // Targets, not EnvFilter: the same directives without the regex engine
    // EnvFilter links in (~0.3 MB of the binary; bench/README.md).
    let filter = Targets::new()
        .with_default(level)
        .with_target("lambda_runtime", LevelFilter::DEBUG)
        .with_target("lambda_runtime_api_client", LevelFilter::DEBUG)
        .with_target("lambda_runtime::layers::panic", LevelFilter::OFF);
    let logs = tracing_subscriber::fmt().with_target(false).without_time();
    let json = std::env::var("AWS_LAMBDA_LOG_FORMAT")
        .is_ok_and(|format| format.eq_ignore_ascii_case("json"));
    // A second init (tests) fails harmlessly; there is nothing to do about it.
    let _ = if json {
        logs.json().finish().with(filter).try_init()
    } else {
        logs.finish().with(filter).try_init()
    };
}

pub(crate) fn log_misconfiguration(error: &LockError) {
    let answer = error.error_type();
    tracing::error!(error = %error, "misconfigured: every invocation will answer {answer}");
}
