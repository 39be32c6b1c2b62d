//! `--lock-name-path` (a JSONPath into the execution input) for a JSONata
//! definition, whose lock states read the name from
//! `$states.context.Execution.Input`: the same steps in JSONata.

/// `--lock-name-path`'s steps (`.key`, `['key']`, `["key"]`, `[0]`) as
/// JSONata steps (`.key`, `` .`key` ``, `[0]`); any other JSONPath (a
/// filter, a wildcard, a slice) has no plain JSONata form and is refused.
pub(crate) fn jsonata_steps(path: &str) -> Result<String, String> {
    let refused = || {
        format!(
            "--lock-name-path {path} in a JSONata definition: only .name, ['name'] and [index] \
             steps can be turned into JSONata"
        )
    };
    let mut rest = path.strip_prefix('$').ok_or_else(refused)?;
    let mut steps = String::new();
    let plain = |name: &str| {
        name.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    while !rest.is_empty() {
        let (name, after) = if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            (after[..end].to_owned(), &after[end..])
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']').ok_or_else(refused)?;
            let inner = &after[..end];
            if !inner.is_empty() && inner.chars().all(|c| c.is_ascii_digit()) {
                steps.push_str(&format!("[{inner}]"));
                rest = &after[end + 1..];
                continue;
            }
            let quoted = (inner.len() >= 2)
                .then(|| inner.strip_prefix('\'').and_then(|q| q.strip_suffix('\'')))
                .flatten()
                .or_else(|| inner.strip_prefix('"').and_then(|q| q.strip_suffix('"')));
            (quoted.ok_or_else(refused)?.to_owned(), &after[end + 1..])
        } else {
            return Err(refused());
        };
        // A backtick name has no escapes: JSONPath's \' cannot be carried over.
        if name.is_empty() || name.contains(['`', '\\']) || name == "*" {
            return Err(refused());
        }
        // JSONata's literals read as values, not steps: quoted like any other name.
        let literal = ["null", "true", "false"].contains(&name.as_str());
        match plain(&name) && !literal {
            true => steps.push_str(&format!(".{name}")),
            false => steps.push_str(&format!(".`{name}`")),
        }
        rest = after;
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::jsonata_steps;

    #[test]
    fn lock_name_paths_become_jsonata_steps_or_are_refused() {
        for (path, steps) in [
            ("$.customerId", ".customerId"),
            ("$.a.b_2", ".a.b_2"),
            ("$['customer id']", ".`customer id`"),
            ("$[\"x-y\"][0].z", ".`x-y`[0].z"),
            // JSONata's literals are no step: quoted.
            ("$.null.true", ".`null`.`true`"),
            ("$['false']", ".`false`"),
        ] {
            assert_eq!(jsonata_steps(path).as_deref(), Ok(steps), "{path}");
        }
        for refused in [
            "$..a",
            "$.a[*]",
            "$.a[?(@.b)]",
            "$.a[1:2]",
            "$['a`b']",
            "$.a[",
            // A JSONPath escape has no counterpart in a JSONata backtick name.
            "$['a\\'b']",
        ] {
            let error = jsonata_steps(refused).expect_err(refused);
            assert!(
                error.contains("only .name, ['name'] and [index]"),
                "{error}"
            );
        }
    }
}
