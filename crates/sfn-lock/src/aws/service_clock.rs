//! The service's own clock: the `Date` header of an AWS answer.
//!
//! A caller's clock may be minutes off and its process may stall for any
//! time between two calls (a laptop asleep, Ctrl-Z, a paused VM). Where a
//! decision depends on how much time passed, it is measured between two
//! answers of the same service, never on the caller's clock: the SSM store's
//! write window (`ssm.rs`) and the CLI's skew check (`sfn-lock run`).
//!
//! [`ServiceDate`] is an interceptor added to one call
//! (`.customize().interceptor(date.clone())`); after the call,
//! [`ServiceDate::millis`] is the `Date` of its last attempt's answer (a
//! retried request keeps the last attempt's, never an earlier one's: later,
//! so any interval measured to it only grows).
//! `Date` has whole seconds: [`DATE_RESOLUTION_MILLIS`].

use std::sync::{Arc, Mutex};

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeDeserializationInterceptorContextRef, BeforeTransmitInterceptorContextRef,
};
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use aws_smithy_types::date_time::{DateTime, Format};

/// An HTTP `Date` is truncated to the second.
pub const DATE_RESOLUTION_MILLIS: i64 = 1000;

/// Records the `Date` header of the answers to the call it is added to.
#[derive(Clone, Debug, Default)]
pub struct ServiceDate {
    seen: Arc<Mutex<Option<i64>>>,
}

impl ServiceDate {
    /// The `Date` of the call's last answer, in milliseconds since the epoch;
    /// `None` if no answer had a readable one.
    pub fn millis(&self) -> Option<i64> {
        self.seen.lock().map(|seen| *seen).unwrap_or(None)
    }
}

/// Parses an HTTP-date (`Sun, 06 Nov 1994 08:49:37 GMT`).
pub fn parse_http_date(value: &str) -> Option<i64> {
    DateTime::from_str(value.trim(), Format::HttpDate)
        .ok()?
        .to_millis()
        .ok()
}

impl Intercept for ServiceDate {
    fn name(&self) -> &'static str {
        "ServiceDate"
    }

    fn read_before_attempt(
        &self,
        _: &BeforeTransmitInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        // Each attempt's own answer: an earlier attempt's Date would be too
        // early for the one that landed.
        if let Ok(mut seen) = self.seen.lock() {
            *seen = None;
        }
        Ok(())
    }

    fn read_after_transmit(
        &self,
        context: &BeforeDeserializationInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let date = context
            .response()
            .headers()
            .get("date")
            .and_then(parse_http_date);
        if let (Some(date), Ok(mut seen)) = (date, self.seen.lock()) {
            *seen = Some(date);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http_date_is_read_to_the_second() {
        assert_eq!(
            parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777_000)
        );
        assert_eq!(parse_http_date("yesterday"), None);
    }
}
