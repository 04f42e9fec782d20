//! Which architecture a checkpoint is, from config.json's `model_type`.

/// The architecture of a checkpoint, from config.json's `model_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VlFamily {
    /// `qwen2_vl` (`Qwen/Qwen2-VL-*-Instruct`): full vision attention, LayerNorm, QuickGELU MLP.
    Qwen2Vl,
    /// `qwen2_5_vl` (`Qwen/Qwen2.5-VL-*-Instruct`): window attention, RMSNorm, SwiGLU MLP.
    Qwen2_5Vl,
    /// `qwen3_vl` (`Qwen/Qwen3-VL-*-Instruct`): learned position grid, DeepStack, QK-norm text model.
    Qwen3Vl,
    /// `gemma3` (`google/gemma-3-*-it`): SigLIP tower, average-pooled projector, Gemma 3 text model with
    /// sliding and global layers (its own config, [`Gemma3Config`](crate::Gemma3Config)).
    Gemma3,
    /// `mistral3` (`mistralai/Mistral-Small-3.1-24B-Instruct-2503`): Pixtral vision tower, patch-merging
    /// projector, Mistral text model with 1-D positions (module `mistral3`).
    Mistral3,
}

impl VlFamily {
    /// config.json's `model_type`.
    pub fn model_type(self) -> &'static str {
        match self {
            VlFamily::Qwen2Vl => "qwen2_vl",
            VlFamily::Qwen2_5Vl => "qwen2_5_vl",
            VlFamily::Qwen3Vl => "qwen3_vl",
            VlFamily::Gemma3 => "gemma3",
            VlFamily::Mistral3 => "mistral3",
        }
    }

    pub(crate) fn from_model_type(model_type: &str) -> Option<Self> {
        [VlFamily::Qwen2Vl, VlFamily::Qwen2_5Vl, VlFamily::Qwen3Vl, VlFamily::Gemma3, VlFamily::Mistral3]
            .into_iter()
            .find(|f| f.model_type() == model_type)
    }

    /// Qwen2-VL and Qwen2.5-VL share the Qwen2 language model (biased q/k/v, MRoPE in sections).
    pub fn is_qwen2(self) -> bool {
        matches!(self, VlFamily::Qwen2Vl | VlFamily::Qwen2_5Vl)
    }
}
