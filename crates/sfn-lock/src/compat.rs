//! The module paths of release 0.1, kept for one release: each re-exports
//! what its module held from where it lives now, and is deprecated.

#[deprecated(since = "0.2.0", note = "moved to `sfn_lock::store::any`")]
pub mod any_store {
    pub use crate::store::any::*;
}

#[deprecated(since = "0.2.0", note = "moved to `sfn_lock::sweep::cleanup`")]
pub mod cleanup {
    pub use crate::sweep::cleanup::*;
}

#[deprecated(since = "0.2.0", note = "moved to `sfn_lock::store::document::doc`")]
pub mod document {
    pub use crate::store::document::doc::*;
}

#[deprecated(since = "0.2.0", note = "moved to `sfn_lock::store::document::store`")]
pub mod document_store {
    pub use crate::store::document::store::*;
}

#[deprecated(since = "0.2.0", note = "moved to `sfn_lock::store::dynamodb`")]
pub mod dynamodb {
    pub use crate::store::dynamodb::*;
}

#[deprecated(
    since = "0.2.0",
    note = "moved to `sfn_lock::store::dynamodb::permits`"
)]
pub mod dynamodb_permits {
    pub use crate::store::dynamodb::permits::*;
}

#[deprecated(since = "0.2.0", note = "moved to `sfn_lock::store::dynamodb::queue`")]
pub mod dynamodb_queue {
    pub use crate::store::dynamodb::queue::*;
}

#[deprecated(since = "0.2.0", note = "moved to `sfn_lock::ports::executions`")]
pub mod executions {
    pub use crate::aws::executions::*;
    pub use crate::ports::executions::*;
    pub use crate::sweep::attach::child_execution_arn;
}

#[deprecated(since = "0.2.0", note = "moved to `sfn_lock::aws::https`")]
pub mod https {
    pub use crate::aws::https::*;
}

#[deprecated(since = "0.2.0", note = "moved to `sfn_lock::ports::listing_pace`")]
pub mod listing_pace {
    pub use crate::ports::listing_pace::*;
}

#[deprecated(since = "0.2.0", note = "moved to `sfn_lock::ports::wake`")]
pub mod queue {
    pub use crate::aws::waker::*;
    pub use crate::ports::wake::*;
    pub use crate::vocab::task_token::*;
}

#[deprecated(since = "0.2.0", note = "moved to `sfn_lock::sweep::reconcile`")]
pub mod reconcile {
    pub use crate::sweep::reconcile::*;
}

#[cfg(feature = "s3")]
#[deprecated(since = "0.2.0", note = "moved to `sfn_lock::store::document::s3`")]
pub mod s3 {
    pub use crate::store::document::s3::*;
}

#[deprecated(since = "0.2.0", note = "moved to `sfn_lock::aws::service_clock`")]
pub mod service_clock {
    pub use crate::aws::service_clock::*;
}

#[cfg(feature = "ssm")]
#[deprecated(since = "0.2.0", note = "moved to `sfn_lock::store::document::ssm`")]
pub mod ssm {
    pub use crate::store::document::ssm::*;
}

#[deprecated(since = "0.2.0", note = "moved to `sfn_lock::store::names`")]
pub mod store_names {
    pub use crate::store::names::*;
}

#[deprecated(since = "0.2.0", note = "moved to `sfn_lock::store::url`")]
pub mod store_url {
    pub use crate::store::url::*;
}

#[deprecated(since = "0.2.0", note = "moved to `sfn_lock::sweep::policy`")]
pub mod sweep_policy {
    pub use crate::sweep::policy::*;
}
