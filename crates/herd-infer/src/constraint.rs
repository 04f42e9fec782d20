//! Constrained decoding through llguidance (the grammar engine of vLLM, SGLang and llama.cpp): a JSON
//! schema becomes a per-step mask over the vocabulary.

use crate::error::{InferError, Result};
use crate::tokenizer::TextTokenizer;
use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::SimpleVob;
use llguidance::{Matcher, ParserFactory};
use std::sync::Arc;

/// Builds matchers for one tokenizer; building the token trie is the expensive part, done once.
pub struct ConstraintEngine {
    factory: Arc<ParserFactory>,
}

impl ConstraintEngine {
    pub fn new(tokenizer: &TextTokenizer, model_vocab: usize) -> Result<Self> {
        let err = |e: anyhow::Error| InferError::Constraint(e.to_string());
        let mut bytes =
            toktrie_hf_tokenizers::ByteTokenizer::from_json_bytes(tokenizer.json().as_bytes()).map_err(err)?;
        bytes.set_eos_tokens(&tokenizer.eos_ids);
        let env = bytes.into_tok_env(Some(model_vocab)).map_err(err)?;
        let mut factory = ParserFactory::new_simple(&env).map_err(err)?;
        factory.quiet();
        Ok(Self { factory: Arc::new(factory) })
    }

    /// A fresh matcher for one sequence.
    pub fn matcher(&self, schema: &serde_json::Value) -> Result<SequenceConstraint> {
        // Compact JSON unless the schema says otherwise: indentation and newlines cost a small model about
        // a third of its tokens on an allocation, and the whitespace carries nothing.
        let mut schema = schema.clone();
        if let Some(object) = schema.as_object_mut() {
            object.entry("x-guidance").or_insert_with(|| serde_json::json!({"whitespace_flexible": false}));
        }
        let parser = self.factory.create_parser(TopLevelGrammar::from_json_schema(schema));
        let matcher = Matcher::new(parser);
        if let Some(e) = matcher.get_error() {
            return Err(InferError::Constraint(format!("the schema cannot be compiled: {e}")));
        }
        Ok(SequenceConstraint { matcher })
    }
}

/// The constraint state of one sequence.
pub struct SequenceConstraint {
    matcher: Matcher,
}

impl SequenceConstraint {
    /// What the grammar allows next. When the grammar is complete only EOS stays.
    pub fn next_mask(&mut self) -> Result<NextTokenMask> {
        let mask = self.matcher.compute_mask_or_eos().map_err(|e| InferError::Constraint(e.to_string()))?;
        Ok(NextTokenMask(mask))
    }

    /// Sets every logit the grammar forbids to -inf.
    pub fn mask_logits(&mut self, logits: &mut [f32]) -> Result<()> {
        self.next_mask()?.apply(logits);
        Ok(())
    }

    pub fn accept(&mut self, token: u32) -> Result<()> {
        self.matcher.consume_token(token).map_err(|e| InferError::Constraint(e.to_string()))
    }
}

/// The tokens the grammar allows at one step.
pub struct NextTokenMask(SimpleVob);

impl NextTokenMask {
    /// The one token allowed, where the grammar leaves one (a key's next piece, the punctuation of an
    /// allocation object): any draw over the masked logits picks it, so it needs no logits.
    pub fn forced(&self) -> Option<u32> {
        (self.0.num_set() == 1).then(|| self.0.first_bit_set()).flatten().map(|id| id as u32)
    }

    /// Sets every logit the grammar forbids to -inf.
    pub fn apply(&self, logits: &mut [f32]) {
        for (id, l) in logits.iter_mut().enumerate() {
            if !self.0.is_allowed(id as u32) {
                *l = f32::NEG_INFINITY;
            }
        }
    }
}
