//! Which store holds the locks: one setting, `LOCK_STORE_URL`, for the
//! functions (and the command line). `LOCK_TABLE_NAME`, the older setting,
//! still works and means `dynamodb://TABLE`.

use crate::vocab::error::LockError;

/// Where the locks live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreUrl {
    /// `dynamodb://TABLE`: one item per lock in the table.
    DynamoDb { table: String },
    /// `s3://BUCKET/PREFIX`: one object per lock under the prefix, which is
    /// empty or ends with `/` ([`s3_folder`]).
    S3 { bucket: String, prefix: String },
    /// `ssm:///PATH`: parameters under `/PATH/`; `path` keeps its leading `/`
    /// and never ends with one.
    Ssm { path: String },
}

const FIELD: &str = "LOCK_STORE_URL";

/// An S3 prefix as a folder: `/` added unless it ends with one or is empty.
/// Keys are the prefix and the encoded name joined as they are, so without it
/// one prefix could begin another's keys: lock `2a` under `team` and lock `a`
/// under `team2` would both be the object `team2a`.
pub fn s3_folder(prefix: &str) -> String {
    match prefix.is_empty() || prefix.ends_with('/') {
        true => prefix.to_string(),
        false => format!("{prefix}/"),
    }
}

impl StoreUrl {
    /// Reads `LOCK_STORE_URL`, or failing that `LOCK_TABLE_NAME`; both set
    /// must name the same table.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, LockError> {
        let set = |name: &str| lookup(name).filter(|value| !value.trim().is_empty());
        let table = set("LOCK_TABLE_NAME").map(|table| StoreUrl::DynamoDb { table });
        match (set(FIELD), table) {
            (None, Some(table)) => Ok(table),
            (None, None) => Err(LockError::invalid(
                FIELD,
                "must be set (dynamodb://TABLE, s3://BUCKET/PREFIX or ssm:///PATH), \
                 or LOCK_TABLE_NAME to the lock table's name",
            )),
            (Some(url), table) => {
                let url = StoreUrl::parse(&url)?;
                match table {
                    Some(table) if table != url => Err(LockError::invalid(
                        FIELD,
                        "and LOCK_TABLE_NAME are both set and name different stores: set one",
                    )),
                    _ => Ok(url),
                }
            }
        }
    }

    pub fn parse(url: &str) -> Result<Self, LockError> {
        let invalid = |rule: &str| LockError::invalid(FIELD, rule.to_string());
        let (scheme, rest) = url
            .trim()
            .split_once("://")
            .ok_or_else(|| invalid("must look like SCHEME://..., e.g. dynamodb://TABLE"))?;
        match scheme {
            "dynamodb" => match rest {
                "" => Err(invalid("dynamodb:// must name a table")),
                table if table.contains('/') => Err(invalid(
                    "dynamodb://TABLE takes a table name only (no path)",
                )),
                table => Ok(StoreUrl::DynamoDb {
                    table: table.to_string(),
                }),
            },
            "s3" => {
                let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
                if bucket.is_empty() {
                    return Err(invalid("s3:// must name a bucket: s3://BUCKET/PREFIX"));
                }
                Ok(StoreUrl::S3 {
                    bucket: bucket.to_string(),
                    prefix: s3_folder(prefix),
                })
            }
            "ssm" => {
                let path = rest.trim_end_matches('/');
                let valid = path.starts_with('/')
                    && path.len() > 1
                    && !path.contains("//")
                    && path
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"_.-/".contains(&b));
                if !valid {
                    return Err(invalid(
                        "ssm:///PATH must name a path of letters, digits and _.-/ \
                         (three slashes: ssm:///sfn-lock/locks)",
                    ));
                }
                // SSM reserves names that begin with aws or ssm, in any case.
                let first = path[1..].to_ascii_lowercase();
                if first.starts_with("aws") || first.starts_with("ssm") {
                    return Err(invalid(
                        "ssm:///PATH must not begin with aws or ssm (reserved by SSM)",
                    ));
                }
                Ok(StoreUrl::Ssm {
                    path: path.to_string(),
                })
            }
            _ => Err(invalid(
                "has an unknown scheme: use dynamodb://, s3:// or ssm://",
            )),
        }
    }
}

impl std::fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreUrl::DynamoDb { table } => write!(f, "dynamodb://{table}"),
            StoreUrl::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
            StoreUrl::Ssm { path } => write!(f, "ssm://{path}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(pairs: &[(&str, &str)]) -> Result<StoreUrl, LockError> {
        StoreUrl::from_lookup(|name| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        })
    }

    #[test]
    fn each_scheme_parses_and_prints_back() {
        for (text, url) in [
            (
                "dynamodb://locks",
                StoreUrl::DynamoDb {
                    table: "locks".into(),
                },
            ),
            (
                "s3://bucket/some/prefix/",
                StoreUrl::S3 {
                    bucket: "bucket".into(),
                    prefix: "some/prefix/".into(),
                },
            ),
            (
                "s3://bucket/team",
                StoreUrl::S3 {
                    bucket: "bucket".into(),
                    prefix: "team/".into(),
                },
            ),
            (
                "s3://bucket/",
                StoreUrl::S3 {
                    bucket: "bucket".into(),
                    prefix: "".into(),
                },
            ),
            (
                "s3://bucket",
                StoreUrl::S3 {
                    bucket: "bucket".into(),
                    prefix: "".into(),
                },
            ),
            (
                "ssm:///sfn-lock/prod/",
                StoreUrl::Ssm {
                    path: "/sfn-lock/prod".into(),
                },
            ),
        ] {
            assert_eq!(StoreUrl::parse(text).unwrap(), url, "{text}");
            assert_eq!(StoreUrl::parse(&url.to_string()).unwrap(), url);
        }
    }

    #[test]
    fn the_table_name_alone_still_works_and_must_agree_with_the_url() {
        let table = StoreUrl::DynamoDb { table: "t".into() };
        assert_eq!(from(&[("LOCK_TABLE_NAME", "t")]).unwrap(), table);
        assert_eq!(
            from(&[("LOCK_TABLE_NAME", "t"), (FIELD, "dynamodb://t")]).unwrap(),
            table
        );
        for pairs in [
            &[("LOCK_TABLE_NAME", "t"), (FIELD, "dynamodb://other")][..],
            &[("LOCK_TABLE_NAME", "t"), (FIELD, "s3://b/p")][..],
            &[][..],
            &[(FIELD, " "), ("LOCK_TABLE_NAME", "")][..],
        ] {
            assert!(
                matches!(from(pairs), Err(LockError::InvalidRequest { field, .. }) if field == FIELD),
                "{pairs:?}"
            );
        }
    }

    #[test]
    fn bad_urls_are_refused_naming_the_setting() {
        for bad in [
            "locks",
            "dynamodb://",
            "dynamodb://t/x",
            "s3://",
            "s3:///prefix",
            "ssm://",
            "ssm:///",
            "ssm://relative",
            "ssm:///has space",
            "ssm:///a//b",
            "ssm:///aws/x",
            "ssm:///SSM-locks",
            "redis://host",
        ] {
            assert!(
                matches!(StoreUrl::parse(bad), Err(LockError::InvalidRequest { field, .. }) if field == FIELD),
                "{bad}"
            );
        }
    }
}
