//! Instants as the lock stores and compares them: whole milliseconds since
//! the epoch, shown and read as RFC 3339 text.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use aws_smithy_types::date_time::Format;
use aws_smithy_types::DateTime;

/// An instant as whole milliseconds since the Unix epoch. Expiry is decided by
/// comparing these integers inside the store's conditional write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EpochMillis(pub i64);

impl EpochMillis {
    pub fn now() -> Self {
        // A clock before 1970 would be a broken host; treat it as the epoch rather than panic.
        let millis = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_millis());
        EpochMillis(i64::try_from(millis).unwrap_or(i64::MAX))
    }

    pub fn plus_seconds(self, seconds: u32) -> Self {
        EpochMillis(self.0.saturating_add(i64::from(seconds) * 1000))
    }

    /// Whole seconds, rounded up: the unit of DynamoDB's TTL attribute.
    pub fn as_epoch_seconds_ceil(self) -> i64 {
        self.0.div_euclid(1000) + i64::from(self.0.rem_euclid(1000) != 0)
    }

    /// RFC 3339 in UTC with millisecond precision, e.g. `2026-11-30T10:00:00.250Z`.
    pub fn to_rfc3339(self) -> String {
        DateTime::from_millis(self.0)
            .fmt(Format::DateTime)
            .unwrap_or_else(|_| self.0.to_string())
    }

    /// Any RFC 3339 `date-time`: `T` or `t`, `Z`, `z` or a `±hh:mm` offset,
    /// fractional seconds of any length (cut to milliseconds), a leap second
    /// (`:60`, read as the next minute's first instant). Anything else is `None`.
    pub fn parse_rfc3339(text: &str) -> Option<Self> {
        // The smithy parser takes UTC (`Z`) only: split the offset off, then apply it.
        let text = text.to_ascii_uppercase();
        let (local, offset_minutes) = split_offset(&text)?;
        // `YYYY-MM-DDTHH:MM:SS`, then an optional fraction; only then are byte indices safe.
        if !local.is_ascii() || local.len() < 19 {
            return None;
        }
        let leap_second = &local[17..19] == "60";
        let local = if leap_second {
            format!("{}59{}Z", &local[..17], &local[19..])
        } else {
            format!("{local}Z")
        };
        let millis = DateTime::from_str(&local, Format::DateTime)
            .ok()?
            .to_millis()
            .ok()?;
        Some(EpochMillis(
            millis + i64::from(leap_second) * 1000 - offset_minutes * 60_000,
        ))
    }
}

/// Splits an upper-cased RFC 3339 date-time into its local part and its offset
/// east of UTC in minutes: `Z`, or `+hh:mm` / `-hh:mm` (`-00:00` is UTC too).
fn split_offset(text: &str) -> Option<(&str, i64)> {
    if let Some(local) = text.strip_suffix('Z') {
        return Some((local, 0));
    }
    let cut = text.len().checked_sub(6)?;
    let (local, offset) = (text.get(..cut)?, text.get(cut..)?.as_bytes());
    let sign = match offset[0] {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let two_digits = |pair: &[u8]| -> Option<i64> {
        match pair {
            [tens @ b'0'..=b'9', ones @ b'0'..=b'9'] => {
                Some(i64::from(tens - b'0') * 10 + i64::from(ones - b'0'))
            }
            _ => None,
        }
    };
    let hours = two_digits(&offset[1..3]).filter(|hours| *hours <= 23)?;
    let minutes = two_digits(&offset[4..6]).filter(|minutes| *minutes <= 59)?;
    (offset[3] == b':').then_some((local, sign * (hours * 60 + minutes)))
}

impl fmt::Display for EpochMillis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trips_at_millisecond_precision() {
        let instant = EpochMillis(1_764_500_000_250);
        let text = instant.to_rfc3339();
        assert_eq!(text, "2025-11-30T10:53:20.25Z");
        // Log lines show instants the same way (`granted_before = %instant`).
        assert_eq!(instant.to_string(), text);
        assert_eq!(EpochMillis::parse_rfc3339(&text), Some(instant));
        assert_eq!(EpochMillis::parse_rfc3339("yesterday"), None);
    }

    #[test]
    fn ttl_seconds_round_up() {
        assert_eq!(EpochMillis(1_000).as_epoch_seconds_ceil(), 1);
        assert_eq!(EpochMillis(1_001).as_epoch_seconds_ceil(), 2);
    }
}
