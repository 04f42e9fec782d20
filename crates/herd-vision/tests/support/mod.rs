//! Helpers shared by the integration tests (not a test target itself).
pub mod checks;
pub mod tiny_mistral3;
pub mod tiny_vl;
