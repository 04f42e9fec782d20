//! Helpers shared by the integration tests (not a test target itself): the checks every family passes
//! and the golden scripts' inputs (also included by `examples/write_tiny_vl.rs` with `#[path]`); the
//! tiny checkpoints are herd-test-support's.
pub mod checks;
pub mod mistral3_golden;
pub mod vl_golden;
