//! GGUF files: the metadata and tensor index read with candle's reader (checked where candle would
//! panic or divide by zero), and the decoder configuration the metadata states.

use super::*;
use crate::error::model_file;
use candle_core::quantized::gguf_file;
use std::path::Path;

/// Reads a GGUF file's metadata and tensor index with candle's reader; `file` names the file in errors.
/// Every GGUF read of herd goes through here (fuzzed: `fuzz/fuzz_targets/gguf.rs`).
pub fn read_gguf<R: std::io::Read + std::io::Seek>(file: &Path, reader: &mut R) -> Result<gguf_file::Content> {
    let start = reader.stream_position().map_err(crate::error::io_error(file))?;
    // candle 0.11 rounds the tensor data offset up to `general.alignment` without checking it for zero,
    // which panics (a division by zero) on a damaged or hostile file instead of returning its error.
    if let Some(problem) = gguf_alignment_problem(reader) {
        return Err(model_file(file, format!("not a readable GGUF file: {problem}")));
    }
    reader.seek(std::io::SeekFrom::Start(start)).map_err(crate::error::io_error(file))?;
    gguf_file::Content::read(reader).map_err(|e| model_file(file, format!("not a readable GGUF file: {e}")))
}

/// Walks the GGUF header's metadata (the layout candle reads) looking for a `general.alignment` of 0.
/// Anything else that is wrong stops the walk quietly: candle's own reader then reports it.
fn gguf_alignment_problem<R: std::io::Read + std::io::Seek>(reader: &mut R) -> Option<String> {
    let mut walk = GgufWalk { reader, wide: true };
    let magic = walk.u32()?;
    if magic != 0x4655_4747 && magic != 0x4747_5546 {
        return None;
    }
    // Version 1 writes lengths as u32, later versions as u64.
    walk.wide = walk.u32()? != 1;
    let _tensors = walk.length()?;
    for _ in 0..walk.length()? {
        // candle keeps a key as lossy UTF-8 without trailing NULs: compare the same way.
        let key_len = walk.length()?;
        let mut key = vec![0; usize::try_from(key_len.min(64)).ok()?];
        walk.reader.read_exact(&mut key).ok()?;
        walk.skip(key_len - key.len() as u64)?;
        while key.last() == Some(&0) {
            key.pop();
        }
        let value_type = walk.u32()?;
        // The integer types candle takes an alignment from: U8, I8, U16, I16, U32, I32.
        if key == b"general.alignment" && value_type <= 5 {
            let mut value = [0; 4];
            walk.reader.read_exact(&mut value[..GgufWalk::<R>::scalar_size(value_type)? as usize]).ok()?;
            if value == [0; 4] {
                return Some(
                    "`general.alignment` is 0; tensor data is aligned to a positive number of bytes (32 by default)"
                        .into(),
                );
            }
            continue;
        }
        walk.skip_value(value_type, 0)?;
    }
    None
}

/// A forward walk over GGUF metadata that reads only what it must (lengths, keys, array types).
struct GgufWalk<'a, R> {
    reader: &'a mut R,
    /// Lengths are u64 (GGUF v2, v3), else u32 (v1).
    wide: bool,
}

impl<R: std::io::Read + std::io::Seek> GgufWalk<'_, R> {
    fn u32(&mut self) -> Option<u32> {
        let mut b = [0; 4];
        self.reader.read_exact(&mut b).ok().map(|()| u32::from_le_bytes(b))
    }

    fn length(&mut self) -> Option<u64> {
        if !self.wide {
            return self.u32().map(u64::from);
        }
        let mut b = [0; 8];
        self.reader.read_exact(&mut b).ok().map(|()| u64::from_le_bytes(b))
    }

    fn skip(&mut self, bytes: u64) -> Option<()> {
        // Short skips read through: a seek empties a `BufReader`'s buffer, and a tokenizer's metadata is
        // hundreds of thousands of short strings.
        if bytes <= 1 << 20 {
            let read = std::io::copy(&mut std::io::Read::take(&mut *self.reader, bytes), &mut std::io::sink()).ok()?;
            return (read == bytes).then_some(());
        }
        self.reader.seek(std::io::SeekFrom::Current(i64::try_from(bytes).ok()?)).ok().map(drop)
    }

    /// Bytes of one value of a scalar GGUF type; `None` for strings (8), arrays (9) and unknown types.
    fn scalar_size(value_type: u32) -> Option<u64> {
        match value_type {
            0 | 1 | 7 => Some(1),
            2 | 3 => Some(2),
            4..=6 => Some(4),
            10..=12 => Some(8),
            _ => None,
        }
    }

    fn skip_value(&mut self, value_type: u32, depth: u32) -> Option<()> {
        if let Some(size) = Self::scalar_size(value_type) {
            return self.skip(size);
        }
        match value_type {
            8 => {
                let len = self.length()?;
                self.skip(len)
            }
            // candle's own nesting limit.
            9 if depth < 64 => {
                let inner = self.u32()?;
                let n = self.length()?;
                if let Some(size) = Self::scalar_size(inner) {
                    return self.skip(n.checked_mul(size)?);
                }
                (0..n).try_for_each(|_| self.skip_value(inner, depth + 1))
            }
            _ => None,
        }
    }
}

/// The decoder configuration a GGUF file's metadata states (`{architecture}.*` keys and the token list),
/// checked so that no size the decoder divides by or splits into is impossible.
pub fn gguf_decoder_config(file: &Path, content: &gguf_file::Content) -> Result<DecoderConfig> {
    let md =
        |key: &str| content.metadata.get(key).ok_or_else(|| model_file(file, format!("GGUF metadata has no `{key}`")));
    let arch = md("general.architecture")?.to_string().map_err(|e| model_file(file, e))?.clone();
    let family = match arch.as_str() {
        "llama" => Family::Llama,
        "qwen2" => Family::Qwen2,
        "qwen3" => Family::Qwen3,
        "phi3" => Family::Phi3,
        other => {
            return Err(model_file(
                file,
                format!("GGUF architecture `{other}` is not supported (llama, qwen2, qwen3, phi3 are)"),
            ));
        }
    };
    let u = |key: &str| -> Result<usize> {
        Ok(md(&format!("{arch}.{key}"))?.to_u32().map_err(|e| model_file(file, e))? as usize)
    };
    let hidden_size = u("embedding_length")?;
    let num_heads = u("attention.head_count")?;
    let num_kv_heads = u("attention.head_count_kv").unwrap_or(num_heads);
    let head_dim = u("attention.key_length").unwrap_or_else(|_| hidden_size.checked_div(num_heads).unwrap_or(0));
    let rms_norm_eps =
        md(&format!("{arch}.attention.layer_norm_rms_epsilon"))?.to_f32().map_err(|e| model_file(file, e))? as f64;
    let rope_theta =
        content.metadata.get(&format!("{arch}.rope.freq_base")).and_then(|v| v.to_f32().ok()).unwrap_or(10_000.0)
            as f64;
    let tokens = md("tokenizer.ggml.tokens")?.to_vec().map_err(|e| model_file(file, e))?.len();
    let config = DecoderConfig {
        family,
        vocab_size: tokens,
        hidden_size,
        num_layers: u("block_count")?,
        num_heads,
        num_kv_heads,
        head_dim,
        rms_norm_eps,
        rope_theta,
        rope_style: if family == Family::Llama { RopeStyle::Interleaved } else { RopeStyle::Halves },
        rope_scaling: None,
        max_positions: u("context_length")?.min(32_768),
    };
    config.check_sizes().map_err(|problem| {
        model_file(file, format!("GGUF metadata `{arch}.*`: {problem}; the file is not a usable model"))
    })?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::quantized::gguf_file::Value;

    /// A GGUF file with llama metadata and no tensors.
    fn gguf_with(head_count: u32) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), gguf_bytes(head_count, Vec::new())).unwrap();
        file
    }

    /// The bytes of a GGUF file with llama metadata, `extra` keys and no tensors.
    fn gguf_bytes(head_count: u32, extra: Vec<(&str, Value)>) -> Vec<u8> {
        let tokens = Value::Array(vec![Value::String("a".into()), Value::String("b".into())]);
        let mut metadata = vec![
            ("general.architecture", Value::String("llama".into())),
            ("llama.embedding_length", Value::U32(64)),
            ("llama.attention.head_count", Value::U32(head_count)),
            ("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5)),
            ("llama.block_count", Value::U32(2)),
            ("llama.context_length", Value::U32(128)),
            ("tokenizer.ggml.tokens", tokens),
        ];
        metadata.extend(extra);
        let refs: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
        let mut bytes = std::io::Cursor::new(Vec::new());
        gguf_file::write(&mut bytes, &refs, &[]).unwrap();
        bytes.into_inner()
    }

    #[test]
    fn gguf_with_zero_alignment_is_refused_by_name_not_a_panic() {
        // candle 0.11 divides by `general.alignment` unchecked: its reader panics on such a file (when this
        // fails, candle checks it itself and `gguf_alignment_problem` can go).
        let zero_aligned = gguf_bytes(4, vec![("general.alignment", Value::U32(0))]);
        let candle = std::panic::catch_unwind(|| gguf_file::Content::read(&mut std::io::Cursor::new(&zero_aligned)));
        assert!(candle.is_err(), "candle's reader no longer panics on a zero alignment");
        for zero in [Value::U32(0), Value::U8(0), Value::I32(0)] {
            let bytes = gguf_bytes(4, vec![("general.alignment", zero)]);
            let err = read_gguf(Path::new("m.gguf"), &mut std::io::Cursor::new(bytes)).map(drop).unwrap_err();
            let err = err.to_string();
            assert!(err.contains("m.gguf") && err.contains("`general.alignment` is 0"), "{err}");
        }
        // A positive (or candle's default) alignment reads, from where the reader stands.
        for extra in [vec![("general.alignment", Value::U32(64))], vec![]] {
            let mut bytes = vec![7u8; 3];
            bytes.extend(gguf_bytes(4, extra));
            let mut reader = std::io::Cursor::new(bytes);
            reader.set_position(3);
            let content = read_gguf(Path::new("m.gguf"), &mut reader).unwrap();
            assert_eq!(gguf_decoder_config(Path::new("m.gguf"), &content).unwrap().num_heads, 4);
        }
    }

    /// Small valid GGUF headers for the fuzz corpus: `HERD_GGUF_SEEDS=fuzz/corpus/gguf cargo test --workspace
    /// --lib gguf_fuzz_seeds` writes them there (fuzz/Cargo.toml).
    #[test]
    fn gguf_fuzz_seeds_read_as_decoder_configs() {
        let seeds = [
            ("llama", gguf_bytes(4, vec![])),
            ("aligned", gguf_bytes(4, vec![("general.alignment", Value::U32(32))])),
            ("grouped", gguf_bytes(8, vec![("llama.attention.head_count_kv", Value::U32(2))])),
            (
                "keyed",
                gguf_bytes(
                    4,
                    vec![("llama.attention.key_length", Value::U32(16)), ("llama.rope.freq_base", Value::F32(1e6))],
                ),
            ),
            ("zero-heads", gguf_bytes(0, vec![])),
        ];
        for (name, bytes) in &seeds {
            let content = read_gguf(Path::new(name), &mut std::io::Cursor::new(bytes)).unwrap();
            assert_eq!(gguf_decoder_config(Path::new(name), &content).is_ok(), *name != "zero-heads", "{name}");
        }
        if let Some(dir) = std::env::var_os("HERD_GGUF_SEEDS") {
            std::fs::create_dir_all(&dir).unwrap();
            for (name, bytes) in &seeds {
                std::fs::write(Path::new(&dir).join(format!("{name}.gguf")), bytes).unwrap();
            }
        }
    }

    #[test]
    fn gguf_with_zero_attention_heads_is_refused_by_name() {
        let file = gguf_with(0);
        let err = load_gguf(file.path(), &Device::Cpu, WeightFormat::Native).map(|_| ()).unwrap_err().to_string();
        assert!(err.contains("attention head count is 0") && err.contains("llama.*"), "{err}");
        // The same file with heads passes the size check and fails only for its missing tensors.
        let err =
            load_gguf(gguf_with(4).path(), &Device::Cpu, WeightFormat::Native).map(|_| ()).unwrap_err().to_string();
        assert!(!err.contains("head count"), "{err}");
    }
}
