//! `sfn-lock run` decides lease expiry by this host's clock (an expired
//! holder is taken over when its `expiresAt` is before our `now`; our own
//! leases end at our `now` plus the lease), on every store. So before it
//! takes a lock it reads the store's own clock (one read,
//! `skew.rs`) and refuses beyond [`MAX_SKEW_MILLIS`].
//!
//! Why 5 s. A host ahead by S takes over an expired lease S early; a host
//! behind by S writes leases that end, for everyone else, S before it
//! believes. A run stops its command (SIGTERM) once no renewal landed before
//! the last sixth of its lease (`run/supervise.rs`): 10 s of the default 60 s
//! lease, so a skew of 5 s still leaves half of that for the command to stop
//! before a well-set rival may take over. The workflows' leases outlast their
//! longest need by `LeaseMarginSeconds`, at least 180 s, and SSM's rule for
//! deleting generations allows 5 minutes of skew plus staleness: 5 s is small
//! beside both. A synchronised host (NTP) is within milliseconds, and the
//! measurement is good to about a second (the `Date` has whole seconds), so
//! 5 s refuses no host that keeps time, whatever the round trip.

// The one read that measures the store's clock, apart from the rule that
// judges it.
mod skew;

use std::fmt;

use aws_config::SdkConfig;
use serde_json::{json, Value};
use sfn_lock::{LockName, StoreError, StoreUrl};

use skew::{measure_skew, Skew};

/// The most this host's clock may be off the store's, at the least
/// favourable end of the measurement's uncertainty: a holder and a rival
/// that both pass are at most 8 s apart, less than the last sixth of the
/// default lease (10 s) in which a run stops its command. DESIGN.md,
/// "Expiry and clocks".
pub const MAX_SKEW_MILLIS: i64 = 4_000;
/// Reads made at most to get a measurement tight enough (a slow round trip
/// widens the uncertainty, which the bound counts against the host).
const MEASUREMENTS: usize = 3;

/// Why `run` took nothing: exit status 1, as for any store failure before
/// COMMAND runs (even with `-x`: a wrong clock is no "lock not obtained").
#[derive(Debug)]
pub enum ClockError {
    /// This host's clock is beyond the bound from the store's.
    Skewed { store: StoreUrl, skew: Skew },
    /// The store gave no answer to read its clock from; the lock's own calls
    /// would have failed the same way.
    Store(StoreError),
}

impl fmt::Display for ClockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClockError::Skewed { store, skew } => {
                let direction = match skew.host_ahead_millis > 0 {
                    true => "ahead of",
                    false => "behind",
                };
                write!(
                    f,
                    "this host's clock is {} s {direction} the clock of the store {store} \
                     (measured to within {} s), more than the {} s sfn-lock run allows: it \
                     decides lease expiry by this clock, so it took no lock and ran nothing; \
                     set the host's clock right (enable NTP, e.g. `timedatectl set-ntp true` \
                     or chrony) and run again",
                    seconds(skew.host_ahead_millis.abs()),
                    seconds(skew.uncertainty_millis),
                    seconds(MAX_SKEW_MILLIS),
                )
            }
            ClockError::Store(error) => write!(f, "the store failed: {error}"),
        }
    }
}

/// Milliseconds as seconds, to a tenth (whole seconds shown bare: "5 s").
fn seconds(millis: i64) -> String {
    let text = format!("{:.1}", millis as f64 / 1000.0);
    text.strip_suffix(".0").map(str::to_owned).unwrap_or(text)
}

/// Measures this host's clock against `url`'s at `lock_name`'s key; `Err`
/// if `run` must take nothing. Logs one JSON line on stderr for the decision
/// (`"event": "clock_skew"`): always when it is not "accepted", and with
/// `verbose` when it is, so that a cron job's log says why it did nothing.
pub async fn check(
    url: &StoreUrl,
    sdk: &SdkConfig,
    lock_name: &LockName,
    verbose: bool,
) -> Result<(), ClockError> {
    let mut line = json!({"event": "clock_skew", "store": url.to_string(),
                          "boundMillis": MAX_SKEW_MILLIS});
    let outcome = match tightest(url, sdk, lock_name).await {
        Ok(Some(skew)) => {
            line["hostAheadMillis"] = json!(skew.host_ahead_millis);
            line["uncertaintyMillis"] = json!(skew.uncertainty_millis);
            match skew.may_exceed(MAX_SKEW_MILLIS) {
                true => Err(ClockError::Skewed {
                    store: url.clone(),
                    skew,
                }),
                false => Ok(()),
            }
        }
        // Nothing measured, so nothing shows the clock wrong: refusing here
        // would make a header's absence an outage. The lock's safety rests
        // on the store's conditional writes; this check only catches a host
        // that does not keep time.
        Ok(None) => {
            line["why"] = json!("the store's answer had no readable Date header");
            decided(line, "unchecked");
            return Ok(());
        }
        Err(error) => {
            line["error"] = json!(error.to_string());
            Err(ClockError::Store(error))
        }
    };
    match &outcome {
        Ok(()) if verbose => decided(line, "accepted"),
        Ok(()) => {}
        Err(ClockError::Skewed { .. }) => decided(line, "refused"),
        Err(ClockError::Store(_)) => decided(line, "store_failed"),
    }
    outcome
}

fn decided(mut line: Value, decision: &str) {
    line["decision"] = json!(decision);
    eprintln!("{line}");
}

/// Up to [`MEASUREMENTS`] reads, until one shows the clock within the bound;
/// else the one with the smallest uncertainty.
async fn tightest(
    url: &StoreUrl,
    sdk: &SdkConfig,
    lock_name: &LockName,
) -> Result<Option<Skew>, StoreError> {
    let mut best: Option<Skew> = None;
    for _ in 0..MEASUREMENTS {
        let Some(skew) = measure_skew(url, sdk, lock_name).await? else {
            return Ok(best);
        };
        if !skew.may_exceed(MAX_SKEW_MILLIS) {
            return Ok(Some(skew));
        }
        if best.is_none_or(|b| skew.uncertainty_millis < b.uncertainty_millis) {
            best = Some(skew);
        }
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_names_the_skew_the_store_the_bound_and_the_fix() {
        let store = StoreUrl::parse("dynamodb://sfn-locks").unwrap();
        let skew = Skew::between(0, 600_000, 400);
        let text = ClockError::Skewed { store, skew }.to_string();
        assert!(text.contains("599.8 s behind"), "{text}");
        assert!(text.contains("dynamodb://sfn-locks"), "{text}");
        assert!(text.contains("within 1.2 s"), "{text}");
        assert!(text.contains("the 4 s sfn-lock run allows"), "{text}");
        assert!(text.contains("NTP"), "{text}");
        assert!(!text.contains('\n'), "one line: {text}");
        let ahead = ClockError::Skewed {
            store: StoreUrl::parse("ssm:///locks").unwrap(),
            skew: Skew::between(600_000, 0, 600_000),
        };
        assert!(ahead.to_string().contains("600 s ahead of"), "{ahead}");
    }
}
