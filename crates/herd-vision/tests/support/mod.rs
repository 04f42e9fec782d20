//! Helpers shared by the integration tests (not a test target itself).
pub mod tiny_vl;
