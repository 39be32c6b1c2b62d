//! Step Functions' task tokens, as `SendTaskSuccess` meets them: a waiting
//! task takes the first output; a task that is closed (completed, timed out,
//! its execution ended) answers `TaskTimedOut`, repeats included. The only
//! in-process model in the explorer: moto keeps no task tokens.

use std::collections::BTreeMap;

use serde_json::Value;

use super::server::Answer;
use super::wire::Parked;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Task {
    Waiting,
    /// Completed with this output (the grant the waiter now holds).
    Completed(Value),
    /// Timed out or ended before any output: the waiter never ran.
    Closed,
}

#[derive(Debug, Default)]
pub struct Tokens {
    pub tasks: BTreeMap<String, Task>,
}

impl Tokens {
    /// A task starts waiting on `token`; a token already used keeps its state.
    pub fn open(&mut self, token: &str) {
        self.tasks.entry(token.to_owned()).or_insert(Task::Waiting);
    }

    /// The waiter's task times out (its wait bound, or its execution ended).
    pub fn close(&mut self, token: &str) {
        if let Some(task @ Task::Waiting) = self.tasks.get_mut(token) {
            *task = Task::Closed;
        }
    }

    pub fn state(&self, token: &str) -> Option<&Task> {
        self.tasks.get(token)
    }

    /// Lands one `SendTaskSuccess`; the answer Step Functions gives.
    pub fn land(&mut self, parked: &Parked) -> Answer {
        let body: Value = serde_json::from_slice(&parked.body).unwrap_or(Value::Null);
        let token = body["taskToken"].as_str().unwrap_or_default();
        let output = body["output"]
            .as_str()
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or(Value::Null);
        match self.tasks.get_mut(token) {
            Some(task @ Task::Waiting) => {
                *task = Task::Completed(output);
                Answer::json(200, "application/x-amz-json-1.0", "{}".into())
            }
            _ => Answer::json(
                400,
                "application/x-amz-json-1.0",
                r#"{"__type":"TaskTimedOut","message":"Task Timed Out"}"#.into(),
            ),
        }
    }
}
