//! Fixtures of herd's tests and examples, in one crate Cargo can see instead of files included across
//! crates with `#[path]`: tiny deterministic checkpoints ([`tiny_vl`], keyed by config.json's
//! `model_type`, and [`tiny_text`]), llama.cpp servers (llama-cpp-python's, [`llama_server`], and
//! llama.cpp's own with several slots, whose occupancy it samples, [`llama_cpp_server`]), a
//! fault-injecting HTTP proxy ([`fault_proxy`]), a hostile OpenAI-compatible server with one mode per
//! bad reply ([`hostile_server`]), an OpenAI-compatible server of known capacity ([`capacity_server`]),
//! a loopback Hugging Face Hub with its CDN ([`hub_server`]) and the decoding of the tables herd-store
//! reads ([`stored_table`]). The inputs of herd-vision's golden scripts, which
//! load its models, are in herd-vision's `tests/support/` (so this crate does not depend on herd-vision).
//!
//! Only a dev-dependency (tests, examples): no shipped crate depends on it. The writers are
//! byte-for-byte what the committed golden values were computed from.

pub mod capacity_server;
pub mod fault_proxy;
pub mod hostile_server;
mod http;
pub mod hub_server;
pub mod llama_cpp_server;
pub mod llama_server;
pub mod stored_table;
pub mod tiny_text;
pub mod tiny_vl;
