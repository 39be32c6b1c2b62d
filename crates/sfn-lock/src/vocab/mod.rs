//! The words every other part of the library speaks: lock names and owners,
//! times, the events' requests, the answers, the errors. No AWS crate and no
//! Lambda runtime (DESIGN.md, "Layers").

pub(crate) mod answer;
pub(crate) mod deadline;
pub(crate) mod error;
pub(crate) mod limits;
pub(crate) mod model;
pub(crate) mod request;
pub(crate) mod task_token;
pub(crate) mod time;
pub(crate) mod view;
