//! The rules of wrap's flags that clap cannot say: a lock name and a
//! JSONPath as acquire-lock takes them, a partition or its placeholder.

/// acquire-lock's rule for `lockName`: 1 to 1024 bytes, no control characters.
pub(crate) fn lock_name(name: &str) -> Result<String, String> {
    if name.is_empty() || name.len() > 1024 {
        return Err(format!("{} bytes: a lock name has 1 to 1024", name.len()));
    }
    if name.chars().any(char::is_control) {
        return Err("a lock name has no control characters".into());
    }
    Ok(name.to_owned())
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
    use super::*;

    #[test]
    fn flags_follow_the_lock_functions_rules() {
        assert!(lock_name("nightly-etl").is_ok());
        assert!(lock_name("${LockName}").is_ok());
        assert!(lock_name("").is_err());
        assert!(lock_name(&"x".repeat(1025)).is_err());
        assert!(lock_name("a\nb").is_err());
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
