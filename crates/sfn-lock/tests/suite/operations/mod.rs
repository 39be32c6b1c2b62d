//! Which AWS operations each Lambda function calls, per lock store, recorded
//! at the wire while the real handlers (`handle_acquire`, `handle_release`,
//! `handle_sweep`, the reconciler's input included) run their scenarios
//! (`scenarios.rs`) against the local stack. The set must be exactly the
//! `operations` section of `contract/code-facts.json`, which
//! tests/template/function_permissions.py holds the template's IAM grants
//! to: a call the file lacks is a call no statement may be checked for, an
//! operation no scenario reaches is a grant no caller needs (or a scenario
//! to add). `UPDATE_CONTRACT=1` rewrites the section.

mod scenarios;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use serde_json::{Map, Value};

/// `service:Operation` (IAM's service prefix, the API's operation name) of
/// every request sent, retries included; a DynamoDB request on an index
/// is `dynamodb:Query index/NAME`, as its grant's resource must name it.
#[derive(Clone, Debug, Default)]
pub struct Recorder(Arc<Mutex<BTreeSet<String>>>);

impl Recorder {
    pub fn operations(&self) -> BTreeSet<String> {
        self.0.lock().expect("recorder").clone()
    }
}

fn iam_prefix(service: &str) -> String {
    match service {
        "SFN" => "states".to_owned(),
        other => other.to_ascii_lowercase(),
    }
}

impl Intercept for Recorder {
    fn name(&self) -> &'static str {
        "OperationRecorder"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let metadata = cfg
            .load::<Metadata>()
            .expect("every SDK request has metadata");
        let mut operation = format!("{}:{}", iam_prefix(metadata.service()), metadata.name());
        let body = context.request().body().bytes().unwrap_or_default();
        if let Ok(Value::Object(request)) = serde_json::from_slice::<Value>(body) {
            if let Some(Value::String(index)) = request.get("IndexName") {
                operation.push_str(&format!(" index/{index}"));
            }
        }
        self.0.lock().expect("recorder").insert(operation);
        Ok(())
    }
}

pub const FUNCTIONS: [&str; 3] = ["acquire-lock", "release-lock", "release-execution-locks"];
pub const STORES: [&str; 3] = ["dynamodb", "s3", "ssm"];

fn contract_path() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../contract/code-facts.json")
}

/// function -> store -> operations.
type Recorded = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

fn committed(facts: &Map<String, Value>) -> Recorded {
    let section = facts.get("operations").cloned().unwrap_or_default();
    serde_json::from_value(section).unwrap_or_default()
}

#[tokio::test]
async fn each_function_calls_exactly_the_operations_the_contract_lists() {
    let mut recorded = Recorded::new();
    for store in STORES {
        for (function, operations) in scenarios::run(store).await {
            recorded
                .entry(function.to_owned())
                .or_default()
                .insert(store.to_owned(), operations);
        }
    }
    let path = contract_path();
    let text = std::fs::read_to_string(&path).expect("contract/code-facts.json");
    let mut facts: Map<String, Value> = serde_json::from_str(&text).expect("contract JSON");
    if std::env::var_os("UPDATE_CONTRACT").is_some() {
        facts.insert(
            "operations".into(),
            serde_json::to_value(&recorded).expect("JSON"),
        );
        let rendered = serde_json::to_string_pretty(&facts).expect("JSON") + "\n";
        std::fs::write(&path, rendered).expect("write contract/code-facts.json");
    }
    let listed = committed(&facts);
    let mut differences = Vec::new();
    for function in FUNCTIONS {
        for store in STORES {
            let empty = BTreeSet::new();
            let seen = recorded
                .get(function)
                .and_then(|s| s.get(store))
                .unwrap_or(&empty);
            let file = listed
                .get(function)
                .and_then(|s| s.get(store))
                .unwrap_or(&empty);
            for operation in seen.difference(file) {
                differences.push(format!(
                    "{function} on {store} calls {operation}, which the file does not list"
                ));
            }
            for operation in file.difference(seen) {
                differences.push(format!(
                    "{function} on {store}: the file lists {operation}, which no scenario reached"
                ));
            }
        }
    }
    assert!(
        differences.is_empty(),
        "{}:\n  {}\nIf the code is right, rewrite the section with `UPDATE_CONTRACT=1 \
         scripts/local-stack.sh cargo test --test suite operations::`, then run \
         tests/template/check.sh (the functions' IAM grants follow it).",
        path.display(),
        differences.join("\n  ")
    );
}
