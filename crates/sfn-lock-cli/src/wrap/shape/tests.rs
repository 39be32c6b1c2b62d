//! shape.rs's tests: the allow-list, ARN by ARN. The shapes as the CLI
//! prints them are tested in tests/wrap/held.rs.

use serde_json::{json, Value};

use super::super::fixtures::settings;
use super::super::template::{Template, WORKLOAD_STATE};
use super::{arn_parts, shape, Shape};

fn shape_of(state: Value) -> Shape {
    let states = json!({"S": state});
    shape(states.as_object().expect("States")).expect("a shape")
}

fn task(resource: &str) -> Value {
    json!({"Type": "Task", "Resource": resource, "End": true})
}

#[test]
fn only_plain_synchronous_lambda_invocations_are_sequential() {
    for plain in [
        "arn:aws:lambda:us-east-1:123456789012:function:f",
        "arn:aws-us-gov:lambda:us-gov-west-1:123456789012:function:f:$LATEST",
        "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:${Name}",
        "arn:aws:states:::lambda:invoke",
        "arn:${Partition}:states:::lambda:invoke",
    ] {
        assert_eq!(shape_of(task(plain)), Shape::Sequential, "{plain}");
    }
    for other in [
        "${FunctionArn}",
        "arn:aws:lambda:us-east-1:123456789012:function",
        "arn:aws:lambda:us-east-1::function:f",
        "arn:aws:lambda:us-east-1:123456789012:layer:f",
        "arn:aws:states:::lambda:invoke.waitForTaskToken",
        "arn:aws:states:us-east-1::lambda:invoke",
        "arn:aws:states:::glue:startJobRun.sync",
        "arn:aws:states:::sqs:sendMessage",
        "arn:aws:states:us-east-1:123456789012:activity:a",
        "arn:awsx:lambda:us-east-1:123456789012:function:f",
        "arn:${A}x:lambda:us-east-1:123456789012:function:f",
    ] {
        assert!(
            matches!(shape_of(task(other)), Shape::MayOutlive { .. }),
            "{other}"
        );
    }
    let invoke = |parameters: Value| {
        let mut state = task("arn:aws:states:::lambda:invoke");
        state["Parameters"] = parameters;
        shape_of(state)
    };
    assert_eq!(invoke(json!({"FunctionName": "f"})), Shape::Sequential);
    assert_eq!(
        invoke(json!({"InvocationType": "RequestResponse"})),
        Shape::Sequential
    );
    for parameters in [
        json!({"InvocationType": "Event"}),
        json!({"InvocationType.$": "$.how"}),
    ] {
        assert!(matches!(invoke(parameters), Shape::MayOutlive { .. }));
    }
}

#[test]
fn states_without_work_are_sequential_and_unknown_ones_are_not() {
    for kind in ["Pass", "Wait", "Choice", "Succeed", "Fail"] {
        assert_eq!(shape_of(json!({"Type": kind})), Shape::Sequential, "{kind}");
    }
    for unknown in [json!({"Type": "Sleep"}), json!({}), json!({"Type": "Task"})] {
        assert!(
            matches!(shape_of(unknown.clone()), Shape::MayOutlive { .. }),
            "{unknown}"
        );
    }
}

#[test]
fn placeholders_are_one_part_of_an_arn() {
    assert_eq!(
        arn_parts("arn:${AWS::Partition}:lambda:${X:Y}:1:function:f"),
        [
            "arn",
            "${AWS::Partition}",
            "lambda",
            "${X:Y}",
            "1",
            "function",
            "f"
        ]
    );
    assert_eq!(arn_parts("a:${open"), ["a", "${open"]);
    assert_eq!(arn_parts("é:"), ["é", ""]);
}

#[test]
fn the_all_held_catch_is_the_files_own() {
    // The reviewed file's Parallel holds on every error: the all-held shape
    // is that Catch, so the two say the same.
    let template = Template::load(&settings(), 1).expect("template loads");
    let held = Shape::MayOutlive {
        state: "S".into(),
        why: "a Map".into(),
        more: 0,
    };
    assert_eq!(
        held.catch(&[]),
        template.value["States"][WORKLOAD_STATE]["Catch"]
    );
}
