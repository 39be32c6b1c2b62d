//! The run's trace: one line per request, fate, answer and decision, named
//! by who did it, and the failure that ends a run with it.

use super::run::{Failure, Run, NARRATOR, OPERATOR, RECONCILER, SWEEPS};

impl Run {
    pub fn note(&mut self, who: usize, text: impl AsRef<str>) {
        let at = (self.now - self.start) as f64 / 1000.0;
        let who = match who {
            RECONCILER => "reconciler".to_owned(),
            OPERATOR => "operator".to_owned(),
            NARRATOR => String::new(),
            id if self.runaways.of.contains_key(&id) => format!("c{}'", self.caller_of(id)),
            id if id >= SWEEPS => format!("sweep{}", id - SWEEPS),
            id => format!("c{id}"),
        };
        self.trace
            .push(format!("t+{at:>9.1}s {who:>10}  {}", text.as_ref()));
    }

    pub fn fail(&mut self, invariant: String) -> Failure {
        Failure {
            invariant,
            trace: std::mem::take(&mut self.trace),
            record: self.draws.record.clone(),
        }
    }
}
