//! Helpers shared by the integration tests (not a test target itself).
pub mod checks;
pub mod tiny_vl;
