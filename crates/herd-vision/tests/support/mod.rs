//! Helpers shared by the integration tests (not a test target itself); the tiny checkpoints and the
//! golden scripts' inputs are herd-test-support's.
pub mod checks;
