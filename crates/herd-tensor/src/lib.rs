//! herd's tensor plumbing shared by its engines (herd-infer's text decoder, herd-vision's
//! vision-language models): one key/value cache ([`KvCache`]) and one safetensors loader
//! ([`safetensors`]), on candle-core alone.
//!
//! Nothing here knows a model family, a tokenizer or a config file: a decoder appends its layers' keys
//! and values to the cache, and a loader hands the memory-mapped tensors to whatever builds the network.

mod kv_cache;
pub mod safetensors;

pub use kv_cache::KvCache;
pub use safetensors::{SafetensorsError, WeightFiles};
