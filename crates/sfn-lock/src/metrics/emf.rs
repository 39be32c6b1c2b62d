//! CloudWatch Embedded Metric Format (EMF): one JSON object on one line of
//! the function's log, which CloudWatch Logs turns into metrics as it ingests
//! the log. Metrics then cost no API call and add nothing to an invocation but
//! formatting this line.
//!
//! The specification (CloudWatch User Guide, "Specification: Embedded metric
//! format"): the root holds `_aws` = `{Timestamp, CloudWatchMetrics}`, where
//! `Timestamp` is epoch milliseconds and each `CloudWatchMetrics` entry names a
//! `Namespace`, `Dimensions` (an array of dimension sets, each an array of
//! dimension names; a set may be empty, at most 30 names) and `Metrics`
//! (`{Name, Unit}`, at most 100). Every name refers to a member of the root:
//! a dimension's a string, a metric's a number.
//!
//! A few lines of `serde_json` instead of an EMF crate: the maintained ones
//! bring a metrics facade with a global recorder, or a whole metrics framework,
//! to format what is here one `json!` (DESIGN.md, "Metrics").

use std::fmt;
use std::io::Write;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::metrics::names::{MetricsSettings, Unit, LOCK_NAME_DIMENSION};
use crate::vocab::model::EpochMillis;

/// One value of one metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    pub name: &'static str,
    pub unit: Unit,
    pub value: u64,
}

impl Sample {
    /// One occurrence of a counted event.
    pub fn count(name: &'static str) -> Self {
        Sample {
            name,
            unit: Unit::Count,
            value: 1,
        }
    }

    pub fn millis(name: &'static str, value: u64) -> Self {
        Sample {
            name,
            unit: Unit::Milliseconds,
            value,
        }
    }
}

/// One EMF document, rendered by [`Document::line`].
#[derive(Clone, Debug)]
pub struct Document<'a> {
    pub namespace: &'a str,
    /// Milliseconds since the Unix epoch: when the decision was made.
    pub timestamp: i64,
    /// Each set is a list of names from `dimensions`; `[]` means "no dimension".
    pub dimension_sets: Vec<Vec<&'a str>>,
    /// Dimension names and their values, and any other string members to
    /// carry along for Logs Insights (those named in no set create no metric).
    pub members: Vec<(&'a str, &'a str)>,
    /// Distinct names, none also a member's name.
    pub samples: &'a [Sample],
}

impl Document<'_> {
    /// The document as one line of JSON, without the newline.
    pub fn line(&self) -> String {
        let mut root = Map::new();
        for (name, value) in &self.members {
            root.insert((*name).to_owned(), Value::from(*value));
        }
        for sample in self.samples {
            root.insert(sample.name.to_owned(), Value::from(sample.value));
        }
        let metrics: Vec<Value> = self
            .samples
            .iter()
            .map(|sample| json!({"Name": sample.name, "Unit": sample.unit.as_str()}))
            .collect();
        root.insert(
            "_aws".to_owned(),
            json!({
                "Timestamp": self.timestamp,
                "CloudWatchMetrics": [{
                    "Namespace": self.namespace,
                    "Dimensions": self.dimension_sets,
                    "Metrics": metrics,
                }],
            }),
        );
        Value::Object(root).to_string()
    }
}

/// Where the lines go: stdout in the functions, anything in tests.
pub type Sink = Arc<dyn Fn(&str) + Send + Sync>;

/// Emits the records; [`Metrics::off`] emits nothing.
#[derive(Clone)]
pub struct Metrics {
    emitter: Option<(Arc<MetricsSettings>, Sink)>,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let settings = self.emitter.as_ref().map(|(settings, _)| settings);
        f.debug_struct("Metrics")
            .field("settings", &settings)
            .finish()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::off()
    }
}

impl Metrics {
    pub fn off() -> Self {
        Metrics { emitter: None }
    }

    /// Each record, one line without its newline, goes to `sink`.
    pub fn new(settings: MetricsSettings, sink: impl Fn(&str) + Send + Sync + 'static) -> Self {
        if !settings.enabled {
            return Metrics::off();
        }
        Metrics {
            emitter: Some((Arc::new(settings), Arc::new(sink))),
        }
    }

    /// To stdout, which Lambda sends to CloudWatch Logs with the log lines.
    pub fn stdout(settings: MetricsSettings) -> Self {
        Metrics::new(settings, |line| {
            // One write under the lock: the line cannot interleave with a log
            // line. A failed write must not fail the lock decision it reports.
            let _ = std::io::stdout()
                .lock()
                .write_all(format!("{line}\n").as_bytes());
        })
    }

    /// One record of `samples` for `lock_name` (none: the request named no
    /// valid lock), at `at`.
    pub fn record(&self, lock_name: Option<&str>, at: EpochMillis, samples: &[Sample]) {
        let Some((settings, sink)) = &self.emitter else {
            return;
        };
        if samples.is_empty() {
            return;
        }
        let mut dimension_sets = vec![vec![]];
        let members: Vec<(&str, &str)> = lock_name
            .map(|name| (LOCK_NAME_DIMENSION, name))
            .into_iter()
            .collect();
        if settings.lock_name_dimension && lock_name.is_some_and(is_dimension_value) {
            dimension_sets.insert(0, vec![LOCK_NAME_DIMENSION]);
        }
        sink(
            &Document {
                namespace: &settings.namespace,
                timestamp: at.0,
                dimension_sets,
                members,
                samples,
            }
            .line(),
        );
    }
}

/// CloudWatch takes only ASCII dimension values with something besides
/// whitespace; a lock name that is not one goes to the dimensionless set alone.
fn is_dimension_value(name: &str) -> bool {
    name.is_ascii() && !name.trim().is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_renders_as_the_specification_shows() {
        let samples = [Sample::count("Granted"), Sample::millis("WaitTime", 1500)];
        let line = Document {
            namespace: "sfn-lock",
            timestamp: 1_764_500_000_250,
            dimension_sets: vec![vec!["LockName"], vec![]],
            members: vec![("LockName", "nightly-etl")],
            samples: &samples,
        }
        .line();
        assert!(!line.contains('\n'), "one line: {line}");
        let parsed: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            parsed,
            json!({
                "_aws": {
                    "Timestamp": 1_764_500_000_250_i64,
                    "CloudWatchMetrics": [{
                        "Namespace": "sfn-lock",
                        "Dimensions": [["LockName"], []],
                        "Metrics": [
                            {"Name": "Granted", "Unit": "Count"},
                            {"Name": "WaitTime", "Unit": "Milliseconds"},
                        ],
                    }],
                },
                "LockName": "nightly-etl",
                "Granted": 1,
                "WaitTime": 1500,
            })
        );
    }

    #[test]
    fn member_values_are_escaped_not_spliced() {
        let samples = [Sample::count("Released")];
        let name = "a\"b\\c\u{2028}é";
        let line = Document {
            namespace: "ns",
            timestamp: 0,
            dimension_sets: vec![vec![]],
            members: vec![("LockName", name)],
            samples: &samples,
        }
        .line();
        let parsed: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(parsed["LockName"], name);
    }
}
