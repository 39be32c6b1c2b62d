//! The library's integration tests, one binary (one link of the AWS SDKs
//! instead of forty): each module is one concern, against the local stack
//! `scripts/local-stack.sh` starts (run them with `make test`). Run one with
//! `cargo test --test suite <module>::`. Two are binaries of their own: the
//! explorer (`tests/explore.rs`) and the tests that move SSM's clock on the
//! local server (`tests/ssm_service_time.rs`).

mod common;

mod bad_input;
mod binaries;
mod cleanup;
mod cleanup_attach;
mod cleanup_batches;
mod cleanup_calls;
mod cleanup_semaphore;
mod cleanup_stores;
mod concurrency;
mod contract;
mod contract_more;
mod document_release_retry;
mod document_stores;
mod error_classes;
mod faults;
mod inspect;
mod logging;
mod max_lease;
mod metrics;
mod misconfigured;
mod model;
mod operations;
mod owner_index;
mod queue;
mod queue_faults;
mod queue_load;
mod queue_wake_claims;
mod reconcile;
mod release_outcomes;
mod renew_race;
mod rfc3339;
mod semaphore;
mod semaphore_formats;
mod semaphore_load;
mod semaphore_model;
mod ssm_store;
mod store;
mod store_prefixes;
mod time_budget;
mod trust_store;
mod wait_bound;
