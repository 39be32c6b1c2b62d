//! The lock functions' settings, read from their environment.

use crate::locker::DEFAULT_LEASE_SECONDS;
use crate::store::url::StoreUrl;
use crate::vocab::error::LockError;
use crate::vocab::request::LeaseSeconds;

/// The function's settings, read from its environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// `LOCK_STORE_URL`, or `LOCK_TABLE_NAME` for a DynamoDB table: required.
    pub store: StoreUrl,
    /// `DEFAULT_LEASE_SECONDS`, optional; defaults to 900.
    pub default_lease: LeaseSeconds,
    /// `MAX_LEASE_SECONDS`, optional: the longest lease a request may ask
    /// for; it also bounds the default lease.
    pub max_lease: Option<LeaseSeconds>,
}

impl Config {
    pub fn from_env() -> Result<Self, LockError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, LockError> {
        let store = StoreUrl::from_lookup(&lookup)?;
        let seconds = |name: &str| -> Result<Option<LeaseSeconds>, LockError> {
            let Some(text) = lookup(name) else {
                return Ok(None);
            };
            let seconds = text
                .trim()
                .parse::<i64>()
                .map_err(|_| LockError::invalid(name, "must be an integer number of seconds"))?;
            LeaseSeconds::new(name, seconds).map(Some)
        };
        let default_lease = match seconds("DEFAULT_LEASE_SECONDS")? {
            Some(lease) => lease,
            None => LeaseSeconds::new("DEFAULT_LEASE_SECONDS", i64::from(DEFAULT_LEASE_SECONDS))?,
        };
        // CloudFormation cannot add: a cap built from a stack's lease terms is
        // written as their sum, `a+b+c`, and the function adds them.
        let max_lease = match lookup("MAX_LEASE_SECONDS") {
            None => None,
            Some(text) => {
                let terms: Option<Vec<i64>> = text
                    .split('+')
                    .map(|term| term.trim().parse().ok())
                    .collect();
                let sum = terms
                    .filter(|terms| terms.iter().all(|term| *term >= 0))
                    .and_then(|terms| terms.into_iter().try_fold(0_i64, i64::checked_add))
                    .ok_or_else(|| {
                        LockError::invalid(
                            "MAX_LEASE_SECONDS",
                            "must be an integer number of seconds, or a sum of them (a+b+c)",
                        )
                    })?;
                Some(LeaseSeconds::new("MAX_LEASE_SECONDS", sum)?)
            }
        };
        // A cap (the template's MaxLeaseSeconds) may be shorter than the
        // default lease: a caller without leaseSeconds then gets the cap, said
        // once at start rather than refused on every acquire.
        let default_lease = match max_lease.filter(|max| max.get() < default_lease.get()) {
            Some(max) => {
                tracing::warn!(
                    default_lease = default_lease.get(),
                    max_lease = max.get(),
                    "DEFAULT_LEASE_SECONDS is above MAX_LEASE_SECONDS: requests without leaseSeconds get MAX_LEASE_SECONDS"
                );
                max
            }
            None => default_lease,
        };
        Ok(Config {
            store,
            default_lease,
            max_lease,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Result<Config, LockError> {
        Config::from_lookup(|name| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        })
    }

    #[test]
    fn max_lease_is_a_number_or_a_sum_and_never_below_the_default() {
        let table = ("LOCK_TABLE_NAME", "locks");
        assert_eq!(config(&[table]).unwrap().max_lease, None);
        let max = |text: &str| config(&[table, ("MAX_LEASE_SECONDS", text)]);
        assert_eq!(max("3600").unwrap().max_lease.map(|m| m.get()), Some(3600));
        assert_eq!(
            max(" 3600 + 900+300 ").unwrap().max_lease.map(|m| m.get()),
            Some(4800)
        );
        for bad in [
            "",
            "1h",
            "3600+",
            "+900",
            "-1+5000",
            "0",
            "31536001",
            "9223372036854775807+1",
        ] {
            assert!(
                matches!(max(bad), Err(LockError::InvalidRequest { field, .. }) if field == "MAX_LEASE_SECONDS"),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn the_cap_also_bounds_the_default_lease() {
        // A cap (the template's MaxLeaseSeconds, or a sum of lease terms) can
        // be below DefaultLeaseSeconds' 900: the function must still start,
        // granting callers without leaseSeconds the cap, not refuse every
        // acquire as misconfigured.
        let table = ("LOCK_TABLE_NAME", "locks");
        let capped = config(&[table, ("MAX_LEASE_SECONDS", "60+30+0")]).unwrap();
        assert_eq!(capped.default_lease.get(), 90);
        assert_eq!(capped.max_lease.map(|m| m.get()), Some(90));
        let below = config(&[
            table,
            ("MAX_LEASE_SECONDS", "600"),
            ("DEFAULT_LEASE_SECONDS", "120"),
        ])
        .unwrap();
        assert_eq!(
            below.default_lease.get(),
            120,
            "a default under the cap is kept"
        );
    }

    #[test]
    fn the_store_is_required_and_lease_defaults_to_900() {
        assert!(
            matches!(config(&[]), Err(LockError::InvalidRequest { field, .. }) if field == "LOCK_STORE_URL")
        );
        let ok = config(&[("LOCK_TABLE_NAME", "locks")]).unwrap();
        assert_eq!(ok.default_lease.get(), 900);
        let set = config(&[
            ("LOCK_TABLE_NAME", "locks"),
            ("DEFAULT_LEASE_SECONDS", " 60 "),
        ])
        .unwrap();
        assert_eq!(
            set.default_lease.get(),
            60,
            "DEFAULT_LEASE_SECONDS is read, not assumed"
        );
    }

    #[test]
    fn default_lease_must_be_a_valid_lease() {
        for bad in ["0", "-5", "ten", "31536001"] {
            let result = config(&[("LOCK_TABLE_NAME", "locks"), ("DEFAULT_LEASE_SECONDS", bad)]);
            assert!(
                matches!(&result, Err(LockError::InvalidRequest { field, .. }) if field == "DEFAULT_LEASE_SECONDS"),
                "{bad}: {result:?}"
            );
        }
    }
}
