//! How far this host's clock is from a store's service clock, from one
//! cheap read: a caller that decides expiry by its own clock (`sfn-lock run`,
//! DESIGN.md "Expiry and clocks") can refuse to when that clock is wrong.
//!
//! The read is one the lock's users already make, so it needs no permission
//! of its own: DynamoDB `GetItem` of the lock's item (its key only), S3
//! `HeadObject` of the lock's object, SSM `GetParameter` of the lock's
//! `current` name. Any answer the service gives carries its `Date`, a missing
//! key's or a refusal's too ([`ServiceDate`]), so an absent lock measures as
//! well as a held one.
//!
//! The service stamped its `Date` somewhere between the host's readings just
//! before and just after the call, and truncated (or rounded) it to the
//! second: [`Skew`] compares the `Date` with the midpoint of the two readings,
//! give or take half the round trip plus the `Date`'s resolution.

//!
//! It lives with the CLI, the one caller that decides expiry on its own
//! clock: the functions never make these reads (and the template's
//! permission check reads the library's calls as theirs).

use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::AttributeValue;
use sfn_lock::aws::service_clock::{ServiceDate, DATE_RESOLUTION_MILLIS};
use sfn_lock::store::dynamodb::LOCK_NAME;
use sfn_lock::store::names::encode_name;
use sfn_lock::{EpochMillis, LockName, StoreError, StoreUrl};

/// A failed read, as the store's own errors say it.
fn failed<E: ProvideErrorMetadata + std::fmt::Debug>(call: &str, error: E) -> StoreError {
    StoreError::Unavailable(format!(
        "{call}: {}",
        error
            .message()
            .or(error.code())
            .map_or_else(|| format!("{error:?}"), str::to_string)
    ))
}

/// This host's clock against a service's, as one read measured it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Skew {
    /// The host's clock minus the service's, estimated: positive when the
    /// host is ahead (fast), negative when it is behind (slow).
    pub host_ahead_millis: i64,
    /// How far the true skew may be from the estimate, either way.
    pub uncertainty_millis: i64,
}

impl Skew {
    /// The skew a `Date` of `service` shows when the host read `before` just
    /// before the call and `after` just after it (epoch milliseconds).
    pub fn between(before: i64, service: i64, after: i64) -> Skew {
        // A host clock stepped back during the call reads after < before: the
        // span is still the width the answer may have come anywhere in.
        let span = after.saturating_sub(before).saturating_abs();
        let midpoint = before.saturating_add(after.saturating_sub(before) / 2);
        Skew {
            host_ahead_millis: midpoint.saturating_sub(service),
            uncertainty_millis: (span / 2 + span % 2).saturating_add(DATE_RESOLUTION_MILLIS),
        }
    }

    /// Whether the skew exceeds `bound_millis` however the uncertainty falls:
    /// a refusal on this is never the measurement's doing.
    /// Whether the true skew may exceed `bound_millis` either way: at the
    /// least favourable end of the measurement's uncertainty. (Two hosts
    /// that each pass are at most twice the bound apart, which is what a
    /// holder and its rival see: the bound is kept by construction only if
    /// it holds for the worst case, not the likeliest.)
    pub fn may_exceed(&self, bound_millis: i64) -> bool {
        self.host_ahead_millis
            .saturating_abs()
            .saturating_add(self.uncertainty_millis)
            > bound_millis
    }
}

/// Reads the service clock of the store `url` names, with clients from
/// `sdk`, at `lock_name`'s key. `Ok(None)`: the service answered without a
/// readable `Date`, so nothing was measured. `Err`: no answer carried a
/// `Date` and the call failed; the store's error, which the lock's own calls
/// would meet too.
pub async fn measure_skew(
    url: &StoreUrl,
    sdk: &aws_config::SdkConfig,
    lock_name: &LockName,
) -> Result<Option<Skew>, StoreError> {
    let date = ServiceDate::default();
    let before = EpochMillis::now().0;
    let answered = read(url, sdk, lock_name, &date).await;
    let after = EpochMillis::now().0;
    match (date.millis(), answered) {
        // An error answer's Date is the service's clock all the same.
        (Some(service), _) => Ok(Some(Skew::between(before, service, after))),
        (None, Err(error)) => Err(error),
        (None, Ok(())) => Ok(None),
    }
}

/// The one read, `date` added to it.
async fn read(
    url: &StoreUrl,
    sdk: &aws_config::SdkConfig,
    lock_name: &LockName,
    date: &ServiceDate,
) -> Result<(), StoreError> {
    match url {
        StoreUrl::DynamoDb { table } => {
            // The key only: the answer stays small however many permits the
            // item holds.
            aws_sdk_dynamodb::Client::new(sdk)
                .get_item()
                .table_name(table)
                .key(LOCK_NAME, AttributeValue::S(lock_name.as_str().to_owned()))
                .projection_expression("#name")
                .expression_attribute_names("#name", LOCK_NAME)
                .customize()
                .interceptor(date.clone())
                .send()
                .await
                .map_err(|error| failed("GetItem", error))?;
        }
        StoreUrl::S3 { bucket, prefix } => {
            // The lock's key as s3.rs names it: where the caller may read.
            // A missing object's 404 carries the Date as well.
            let key = format!("{prefix}{}", encode_name(lock_name.as_str()));
            sfn_lock::store::any::s3_client(sdk)
                .head_object()
                .bucket(bucket)
                .key(key)
                .customize()
                .interceptor(date.clone())
                .send()
                .await
                .map_err(|error| failed("HeadObject", error))?;
        }
        StoreUrl::Ssm { path } => {
            // The lock's hint, as ssm.rs names it.
            let current = format!("{path}/{}/current", encode_name(lock_name.as_str()));
            aws_sdk_ssm::Client::new(sdk)
                .get_parameter()
                .name(current)
                .customize()
                .interceptor(date.clone())
                .send()
                .await
                .map_err(|error| failed("GetParameter", error))?;
        }
        #[allow(unreachable_patterns)] // a build with every store has no other
        other => {
            return Err(StoreError::Misconfigured(format!(
                "{other} names a store this build left out"
            )))
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_date_is_compared_with_the_midpoint_give_or_take_half_the_round_trip_and_a_second() {
        let skew = Skew::between(10_000, 4_000, 10_400);
        assert_eq!(skew.host_ahead_millis, 6_200);
        assert_eq!(skew.uncertainty_millis, 1_200);
        assert!(
            !skew.may_exceed(7_400),
            "exactly the bound is not beyond it"
        );
        assert!(skew.may_exceed(7_399));
    }

    #[test]
    fn a_skew_that_may_exceed_the_bound_at_the_worst_end_is_caught() {
        // 2.6 s ahead give or take 1.2 s: up to 3.8 s.
        let skew = Skew::between(10_000, 7_600, 10_400);
        assert!(!skew.may_exceed(3_800));
        assert!(skew.may_exceed(3_799));
        let behind = Skew::between(10_000, 12_800, 10_400);
        assert!(behind.may_exceed(3_799), "behind counts the same");
    }

    #[test]
    fn a_host_behind_is_measured_the_same_way() {
        let skew = Skew::between(10_000, 17_000, 10_000);
        assert_eq!(skew.host_ahead_millis, -7_000);
        assert!(skew.may_exceed(7_999));
    }

    #[test]
    fn a_slow_round_trip_counts_against_the_host() {
        // 20 s ahead by the midpoint, but the answer took 40 s: it may be right.
        let skew = Skew::between(0, 0, 40_000);
        assert_eq!(skew.host_ahead_millis, 20_000);
        assert_eq!(skew.uncertainty_millis, 21_000);
        assert!(
            skew.may_exceed(40_999),
            "a slow answer counts against the host"
        );
        // 40 s ahead by the midpoint: at least 19 s whenever it was answered.
        let skew = Skew::between(0, -20_000, 40_000);
        assert_eq!(skew.host_ahead_millis, 40_000);
        assert!(!skew.may_exceed(61_000));
    }

    #[test]
    fn a_clock_stepped_back_during_the_call_still_bounds_the_answer() {
        let skew = Skew::between(10_000, 9_500, 8_000);
        assert_eq!(skew.host_ahead_millis, -500);
        assert_eq!(skew.uncertainty_millis, 2_000);
        assert!(!skew.may_exceed(2_500));
    }
}
