//! The stores whose only atomic step is "write this whole document if the
//! stored one is still the one I read": the document and its decisions
//! (`doc`), the contract on top of it (`store`), and the two stores: `s3`
//! (ETags) and `ssm/` (a chain of create-if-absent generations).

pub mod doc;
pub mod documents;
#[cfg(feature = "s3")]
pub mod s3;
#[cfg(feature = "ssm")]
pub mod ssm;
pub mod store;
