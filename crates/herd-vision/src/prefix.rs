//! A prompt computed up to its last token, which every family's prefill returns and extend continues.

use candle_core::Tensor;
use herd_tensor::KvCache;

/// A prompt computed up to its last token: the keys and values of every layer, the next text position,
/// and the logits after the last token. [`VlModel::extend`](crate::VlModel::extend) continues it
/// without changing it.
#[derive(Debug, Clone)]
pub struct Prefix {
    ids: Vec<u32>,
    cache: KvCache,
    next_position: u32,
    logits: Tensor,
}

impl Prefix {
    pub(crate) fn new(ids: Vec<u32>, cache: KvCache, next_position: u32, logits: Tensor) -> Self {
        Self { ids, cache, next_position, logits }
    }

    /// The token ids computed (image placeholders expanded).
    pub fn token_ids(&self) -> &[u32] {
        &self.ids
    }

    /// How many tokens were computed.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether no token was computed (never true for a prefix made by
    /// [`VlModel::prefill`](crate::VlModel::prefill)).
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Logits (f32, `[vocab]`) for the token after the last one.
    pub fn logits(&self) -> &Tensor {
        &self.logits
    }

    /// The keys and values of every layer.
    pub(crate) fn cache(&self) -> &KvCache {
        &self.cache
    }

    /// The text position the next token takes.
    pub(crate) fn next_position(&self) -> u32 {
        self.next_position
    }

    /// This prefix continued by `more`, whose keys and values `cache` now holds too.
    pub(crate) fn extended(&self, more: &[u32], cache: KvCache, logits: Tensor) -> Self {
        let mut ids = self.ids.clone();
        ids.extend_from_slice(more);
        Self { ids, cache, next_position: self.next_position + more.len() as u32, logits }
    }
}
