//! The rules of wrap's flags that clap cannot say: a lock name, a limit and
//! a JSONPath as acquire-lock takes them, a partition or its placeholder.

use sfn_lock::{Limit, LockName, MAX_LOCK_NAME_BYTES};

/// acquire-lock's rule for `lockName`, the library's own (`LockName::new`),
/// so that a wrapped definition never names a lock the function refuses.
pub(crate) fn lock_name(name: &str) -> Result<LockName, String> {
    // The sentence before the library's says the rule whole; the library's
    // says what this name broke.
    LockName::new(name).map_err(|error| {
        format!("a lock name has 1 to {MAX_LOCK_NAME_BYTES} bytes, no control characters: {error}")
    })
}

/// acquire-lock's rule for `limit` (`Limit::new`): how many may hold the
/// lock at once.
pub(crate) fn limit(text: &str) -> Result<Limit, String> {
    let limit = text
        .parse::<i64>()
        .map_err(|error| format!("not a whole number: {error}"))?;
    Limit::new("--limit", limit).map_err(|error| error.to_string())
}

/// A JSONPath into the execution input: `$.key` or `$['key']`, more after it.
pub(crate) fn lock_name_path(path: &str) -> Result<String, String> {
    // `$$...` (the context object) fails too: the rest starts with `$`.
    let rest = path.strip_prefix('$').unwrap_or_default();
    if !(rest.starts_with('.') || rest.starts_with('[')) || rest.len() < 2 {
        return Err("a JSONPath into the execution input, such as $.customerId".into());
    }
    if path.chars().any(char::is_control) {
        return Err("a JSONPath has no control characters".into());
    }
    Ok(path.to_owned())
}

/// An AWS partition (`aws`, `aws-cn`, `aws-us-gov`, `aws-iso-b`, ...), or a
/// `${Name}` placeholder for the user's DefinitionSubstitutions: either goes
/// into the ARN as it is, inside a JSON string.
pub(crate) fn partition(partition: &str) -> Result<String, String> {
    // "aws", then "-" and lowercase letters or digits any number of times.
    let is_partition = partition.split('-').enumerate().all(|(index, part)| {
        if index == 0 {
            part == "aws"
        } else {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        }
    });
    let is_placeholder = partition
        .strip_prefix("${")
        .and_then(|rest| rest.strip_suffix('}'))
        .is_some_and(|name| {
            !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        });
    if is_partition || is_placeholder {
        Ok(partition.to_owned())
    } else {
        Err("a partition such as aws, aws-cn or aws-us-gov, or a placeholder such as '${Partition}'".into())
    }
}

#[cfg(test)]
mod tests {
    use sfn_lock::MAX_LIMIT;

    use super::*;

    #[test]
    fn flags_follow_the_lock_functions_rules() {
        assert!(lock_name("nightly-etl").is_ok());
        assert!(lock_name("${LockName}").is_ok());
        assert!(lock_name("").is_err());
        assert!(lock_name(&"x".repeat(1024)).is_ok());
        assert!(lock_name(&"x".repeat(1025)).is_err());
        assert!(lock_name("a\nb").is_err());
        assert_eq!(limit("1").map(Limit::get), Ok(1));
        assert_eq!(limit(&MAX_LIMIT.to_string()).map(Limit::get), Ok(MAX_LIMIT));
        for bad in ["0", "-1", "x", ""] {
            assert!(limit(bad).is_err(), "{bad:?}");
        }
        assert!(limit(&(MAX_LIMIT + 1).to_string()).is_err());
        assert!(lock_name_path("$.customerId").is_ok());
        assert!(lock_name_path("$['customer id']").is_ok());
        for bad in ["customerId", "$", "$.", "$$.Execution.Input.x", "$x"] {
            assert!(lock_name_path(bad).is_err(), "{bad}");
        }
        for good in [
            "aws",
            "aws-cn",
            "aws-us-gov",
            "aws-iso-b",
            "${Partition}",
            "${AWS_P1}",
        ] {
            assert_eq!(partition(good).as_deref(), Ok(good));
        }
        for bad in [
            "",
            "aw",
            "awscn",
            "aws-",
            "aws--cn",
            "aws-CN",
            "aws:cn",
            "arn:aws",
            "aws cn",
            "${}",
            "${Partition",
            "${AWS::Partition}",
            "${a\"b}",
            "\"aws\"",
        ] {
            assert!(partition(bad).is_err(), "{bad:?}");
        }
    }
}
