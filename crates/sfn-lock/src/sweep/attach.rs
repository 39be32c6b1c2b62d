//! The attach variant's child execution, named so the sweep can find it.

use sha2::{Digest, Sha256};

/// The child execution the attach variant starts for `parent_execution_arn`.
/// The ASL names it `States.Format('{}-{}', States.Hash($$.Execution.Id,
/// 'SHA-256'), $$.Execution.RedriveCount)`, so the sweep can find it without
/// reading the parent's history. `None` if `target_state_machine_arn` is not a
/// state machine ARN.
pub fn child_execution_arn(
    target_state_machine_arn: &str,
    parent_execution_arn: &str,
    parent_redrive_count: u32,
) -> Option<String> {
    let (prefix, name) = target_state_machine_arn.split_once(":stateMachine:")?;
    let digest = Sha256::digest(parent_execution_arn.as_bytes());
    let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
    Some(format!(
        "{prefix}:execution:{name}:{hex}-{parent_redrive_count}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_child_is_named_as_the_asl_names_it() {
        let target = "arn:aws:states:us-east-1:123456789012:stateMachine:nightly.etl";
        let parent = "arn:aws:states:us-east-1:123456789012:execution:locked:run-1";
        let child = child_execution_arn(target, parent, 2).unwrap();
        let (prefix, suffix) = child.rsplit_once(':').unwrap();
        assert_eq!(
            prefix,
            "arn:aws:states:us-east-1:123456789012:execution:nightly.etl"
        );
        let (hash, redrives) = suffix.split_once('-').unwrap();
        assert_eq!(redrives, "2");
        assert_eq!(hash.len(), 64);
        assert!(hash
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        // sha256("abc"), the FIPS 180-2 test vector: the same digest States.Hash gives.
        let abc = child_execution_arn(target, "abc", 0).unwrap();
        assert!(
            abc.ends_with(":ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad-0")
        );
        assert_eq!(child_execution_arn("not-an-arn", parent, 0), None);
    }

    #[test]
    fn the_child_is_in_the_targets_partition_and_region() {
        for (partition, region) in [("aws-cn", "cn-north-1"), ("aws-us-gov", "us-gov-west-1")] {
            let target = format!("arn:{partition}:states:{region}:123456789012:stateMachine:etl");
            let parent =
                format!("arn:{partition}:states:{region}:123456789012:execution:locked:run");
            let child = child_execution_arn(&target, &parent, 0).unwrap();
            let prefix = format!("arn:{partition}:states:{region}:123456789012:execution:etl:");
            assert!(child.starts_with(&prefix), "{child}");
            assert!(child.ends_with("-0"), "{child}");
        }
    }
}
