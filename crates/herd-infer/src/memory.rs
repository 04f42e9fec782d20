//! How much memory a model will need on a device, counted from its files' headers before any weight is
//! read, and whether that fits: the check that runs before [`LocalModel::load`](crate::LocalModel::load)
//! or [`VisionModel::load`](crate::VisionModel::load), so that a model that cannot fit is refused with its
//! numbers and the ways out instead of failing out of memory half an hour into its load.
//!
//! The estimate mirrors the loaders' decisions (which precision the weights are held in, which tensors
//! are held twice or kept as the file stores them) from the safetensors headers, the GGUF tensor index
//! and config.json; nothing here opens the device or reads a weight.

use crate::error::{InferError, Result, io_error, model_file};
use crate::local::DeviceChoice;
use crate::model::{gguf_decoder_config, parse_hf_config, read_gguf};
use herd_backend::{ModelEntry, ModelFiles, WeightChoice, WeightDType};
use std::io::Read;
use std::path::Path;

/// What the run will hold at once beside the weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Workload {
    /// Sequences whose keys and values are cached at the same time (a scoring group, a generation batch).
    pub sequences: usize,
    /// Tokens each of them reaches (prompt and generated text).
    pub tokens_per_sequence: usize,
}

/// A model's memory on one device, part by part, in bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryEstimate {
    /// Weight elements counted from the files' headers (a tied output layer once).
    pub parameters: u64,
    /// The weights as the load holds them: at [`weights_held_as`](Self::weights_held_as), with what the
    /// loaders keep otherwise (the text decoder's token embedding in f32, or as the GGUF file stores it on
    /// CPU; a tied output layer as its own copy in the layers' format).
    pub weights_bytes: u64,
    /// The layers' precision, e.g. "bf16", "f32", "int8 (herd-kernels)".
    pub weights_held_as: String,
    /// layers × 2 (K and V) × kv_heads × head_dim × bytes per activation × sequences × tokens.
    pub kv_cache_bytes: u64,
    /// Activations and logits headroom: sequences × vocabulary × 4 bytes for the logits, plus 10 % of
    /// the weights for everything else a forward pass holds (activations, attention scores, rope tables,
    /// the image encoder's activations, allocator slack).
    pub working_bytes: u64,
    /// The most the load itself holds at once: the text loaders read every tensor of the files into
    /// memory before converting them one by one (int8 from f32 or bf16 files, or f32 files loaded at
    /// bf16, peak above what they finally hold), plus the copies the tensor being converted needs.
    pub loading_bytes: u64,
    /// The larger of weights + KV cache + working and the loading peak.
    pub total_bytes: u64,
    /// The workload the KV cache and logits were counted for.
    pub workload: Workload,
    /// KV cache bytes per cached token of one sequence (what one more token of context costs).
    pub kv_bytes_per_token: u64,
}

/// The largest safetensors header read (the JSON before the data); real ones are a few MB at most.
const MAX_HEADER_BYTES: u64 = 100_000_000;

/// herd-kernels' [`Int8Matrix`](herd_kernels::Int8Matrix) layout: output rows in panels of 16 (its
/// private `LANES`; a last partial panel is padded with zero rows), one byte per weight, and per block of
/// [`herd_kernels::BLOCK`] (32) inputs of each padded row an f32 scale and an f32 minimum (`Int8Matrix::
/// size_bytes`: quants + 4 · (scales + mins)). So 1.25 bytes a weight; checked against the kernel's own
/// count in the tests.
const INT8_PANEL_ROWS: u64 = 16;

/// Tensor names of the text loaders (model/weights.rs's `HF_NAMES` and `GGUF_NAMES`): the token
/// embedding and the output layer, the two held differently from the rest.
const HF_EMBED: &str = "model.embed_tokens.weight";
const HF_LM_HEAD: &str = "lm_head.weight";
const GGUF_EMBED: &str = "token_embd.weight";
const GGUF_LM_HEAD: &str = "output.weight";

/// Estimates what `entry` (its files at `files`) needs on `device`, with `weights` (the command line's
/// `--weights`; `None` takes the registry's, else `auto`) and `workload`. Reads only headers and
/// config.json. `--weights int8` on an accelerator, and a vision model's int8 or GGUF file, are refused
/// with the error the load would give.
pub fn estimate_memory(
    entry: &ModelEntry,
    files: &ModelFiles,
    device: DeviceChoice,
    weights: Option<WeightChoice>,
    workload: Workload,
) -> Result<MemoryEstimate> {
    let choice = weights.or(entry.weights).unwrap_or_default();
    let counted = if entry.vision {
        vision_counts(entry, files, device, choice)?
    } else {
        text_counts(entry, files, device, choice)?
    };
    Ok(counted.estimate(workload))
}

/// Free memory on `device` and where the number came from: on CPU `MemAvailable` of /proc/meminfo; on
/// CUDA `nvidia-smi`'s `memory.free` of the GPU (the `N`-th entry of `CUDA_VISIBLE_DEVICES` when that is
/// set, as CUDA numbers devices); `None` on Metal, or when the number cannot be read (the caller then
/// skips the check and says so). Never panics; waits at most 10 s for nvidia-smi.
pub fn available_memory(device: DeviceChoice) -> Option<(u64, String)> {
    match device {
        DeviceChoice::Cpu => {
            let text = std::fs::read_to_string("/proc/meminfo").ok()?;
            let available = (mem_available(&text)?, "MemAvailable in /proc/meminfo".to_string());
            // In a container (Slurm, Docker) the cgroup's limit binds before the machine's memory does.
            let read = |name: &str| std::fs::read_to_string(Path::new("/sys/fs/cgroup").join(name)).ok();
            match read("memory.max").zip(read("memory.current")).and_then(|(max, current)| cgroup_room(&max, &current))
            {
                Some(room) if room < available.0 => Some((room, "the cgroup's memory.max less memory.current".into())),
                _ => Some(available),
            }
        }
        DeviceChoice::Cuda(index) => {
            let (gpu, note) = match std::env::var("CUDA_VISIBLE_DEVICES") {
                Ok(visible) if !visible.trim().is_empty() => {
                    let gpu = visible.split(',').map(str::trim).nth(index).filter(|g| !g.is_empty())?;
                    (gpu.to_string(), format!(" (cuda:{index} through CUDA_VISIBLE_DEVICES)"))
                }
                _ => (index.to_string(), String::new()),
            };
            let out = run_with_timeout(
                "nvidia-smi",
                &["--query-gpu=memory.free", "--format=csv,noheader,nounits", "-i", &gpu],
                std::time::Duration::from_secs(10),
            )?;
            let mib: u64 = out.lines().map(str::trim).find(|l| !l.is_empty())?.parse().ok()?;
            Some((mib.checked_mul(1 << 20)?, format!("nvidia-smi memory.free of GPU {gpu}{note}")))
        }
        DeviceChoice::Metal(_) => None,
    }
}

/// `Ok` when `estimate.total_bytes <= limit`; else [`InferError::DoesNotFit`], whose message gives the
/// estimate part by part, the limit and `limit_source`, and the options, one a line.
pub fn check_fits(
    alias: &str,
    device: DeviceChoice,
    estimate: &MemoryEstimate,
    limit: u64,
    limit_source: &str,
) -> Result<()> {
    if estimate.total_bytes <= limit {
        return Ok(());
    }
    let device = device_label(device);
    let e = estimate;
    let w = e.workload;
    let mut message = format!(
        "`{alias}` does not fit on {device}: it needs about {} but the limit is {} ({limit_source}).\n\
         estimate: weights {} ({} parameters at {}) + KV cache {} ({} × {}) + working {} = {}\n",
        gb(e.total_bytes),
        gb(limit),
        gb(e.weights_bytes),
        parameters(e.parameters),
        e.weights_held_as,
        gb(e.kv_cache_bytes),
        counted(w.sequences as u64, "sequence", "sequences"),
        counted(w.tokens_per_sequence as u64, "token", "tokens"),
        gb(e.working_bytes),
        gb(e.steady_bytes()),
    );
    if e.loading_bytes > e.steady_bytes() {
        message.push_str(&format!(
            "loading peaks higher, at {}: the files' tensors are all read in before they are converted\n",
            gb(e.loading_bytes)
        ));
    }
    message.push_str(
        "options:\n  \
         - a smaller model (`herd models` lists them)\n  \
         - `--weights int8` (CPU only: about 1 byte a parameter)\n  \
         - another `--device`\n  \
         - `--backend openai`: serve the model with vLLM or SGLang elsewhere and point herd at it\n  \
         - `--max-memory GB` to override the limit when the estimate is known to be pessimistic",
    );
    Err(InferError::DoesNotFit { alias: alias.to_string(), needed_bytes: e.total_bytes, limit_bytes: limit, message })
}

impl MemoryEstimate {
    /// Weights + KV cache + working: what the model holds while it runs.
    fn steady_bytes(&self) -> u64 {
        self.weights_bytes.saturating_add(self.kv_cache_bytes).saturating_add(self.working_bytes)
    }
}

/// What the files and config say, before the workload is applied.
#[derive(Debug, Default)]
struct Counts {
    parameters: u64,
    weights_bytes: u64,
    loading_bytes: u64,
    held_as: String,
    layers: u64,
    kv_heads: u64,
    head_dim: u64,
    vocab: u64,
    activation_bytes: u64,
}

impl Counts {
    fn estimate(self, workload: Workload) -> MemoryEstimate {
        let kv_bytes_per_token = mul(&[self.layers, 2, self.kv_heads, self.head_dim, self.activation_bytes]);
        let kv_cache_bytes = mul(&[kv_bytes_per_token, workload.sequences as u64, workload.tokens_per_sequence as u64]);
        let working_bytes = mul(&[workload.sequences as u64, self.vocab, 4]).saturating_add(self.weights_bytes / 10);
        let mut estimate = MemoryEstimate {
            parameters: self.parameters,
            weights_bytes: self.weights_bytes,
            weights_held_as: self.held_as,
            kv_cache_bytes,
            working_bytes,
            loading_bytes: self.loading_bytes,
            total_bytes: 0,
            workload,
            kv_bytes_per_token,
        };
        estimate.total_bytes = estimate.steady_bytes().max(estimate.loading_bytes);
        estimate
    }
}

/// A product that saturates rather than overflows (a hostile header's sizes).
fn mul(factors: &[u64]) -> u64 {
    factors.iter().fold(1u64, |acc, &f| acc.saturating_mul(f))
}

/// One tensor as a file's header states it.
struct TensorInfo {
    name: String,
    dims: Vec<u64>,
    elements: u64,
    /// Bytes it takes in the file, which is what the text loaders hold of it before converting it.
    file_bytes: u64,
}

/// Sums over tensors as the text loaders treat them: every tensor read in (`file_bytes`) before any is
/// converted, then each replaced by what is held of it.
#[derive(Default)]
struct Tally {
    parameters: u64,
    held: u64,
    read: u64,
    /// Σ max(0, held − read): with `read`, a bound on the peak whatever the conversion order (exact when
    /// every tensor grows, or every tensor shrinks, in conversion).
    growth: u64,
    largest: u64,
}

impl Tally {
    fn add(&mut self, elements: u64, read: u64, held: u64) {
        self.parameters = self.parameters.saturating_add(elements);
        self.read = self.read.saturating_add(read);
        self.held = self.held.saturating_add(held);
        self.growth = self.growth.saturating_add(held.saturating_sub(read));
        self.largest = self.largest.max(elements);
    }

    /// A held copy of something already counted (a tied output layer made from the embedding).
    fn add_copy(&mut self, held: u64) {
        self.held = self.held.saturating_add(held);
        self.growth = self.growth.saturating_add(held);
    }

    /// The loading peak: everything read, the growth of what is converted, and the f32 copies the tensor
    /// being converted passes through (one for a dtype change; three when requantised to int8: the
    /// transposed dense copy, its flattening and the values handed to the kernel).
    fn loading(&self, int8: bool) -> u64 {
        let copies = if int8 { 3 } else { 1 };
        self.read.saturating_add(self.growth).saturating_add(mul(&[self.largest, 4, copies]))
    }
}

/// Bytes of herd-kernels' int8 matrix of `rows` outputs × `cols` inputs (see [`INT8_PANEL_ROWS`]).
fn int8_matrix_bytes(rows: u64, cols: u64) -> u64 {
    let padded = rows.div_ceil(INT8_PANEL_ROWS).saturating_mul(INT8_PANEL_ROWS);
    let blocks = cols / herd_kernels::BLOCK as u64;
    mul(&[padded, cols]).saturating_add(mul(&[padded, blocks, 2, 4]))
}

/// A linear layer's weight `[rows, cols]` as `WeightSource::linear_from` holds it: int8 where int8 was
/// asked for and the input size is a multiple of the block, else dense at `dense` bytes an element.
fn linear_bytes(rows: u64, cols: u64, int8: bool, dense: u64) -> u64 {
    if int8 && cols > 0 && cols.is_multiple_of(herd_kernels::BLOCK as u64) {
        int8_matrix_bytes(rows, cols)
    } else {
        mul(&[rows, cols, dense])
    }
}

/// The bytes an element of the safetensors dtype takes.
fn safetensors_dtype_bytes(dtype: &str) -> Option<u64> {
    Some(match dtype {
        "F64" | "I64" | "U64" => 8,
        "F32" | "I32" | "U32" => 4,
        "F16" | "BF16" | "I16" | "U16" => 2,
        "F8_E4M3" | "F8_E5M2" | "I8" | "U8" | "BOOL" => 1,
        _ => return None,
    })
}

/// The tensors a safetensors file's header lists (8-byte little-endian length, then that much JSON),
/// without reading their data.
fn safetensors_header(path: &Path) -> Result<Vec<TensorInfo>> {
    let mut file = std::fs::File::open(path).map_err(io_error(path))?;
    let file_len = file.metadata().map_err(io_error(path))?.len();
    let mut len = [0u8; 8];
    file.read_exact(&mut len).map_err(io_error(path))?;
    let len = u64::from_le_bytes(len);
    if len > MAX_HEADER_BYTES {
        return Err(model_file(
            path,
            format!(
                "the safetensors header claims {len} bytes (at most {MAX_HEADER_BYTES} are read): the file is damaged or not safetensors"
            ),
        ));
    }
    if len > file_len.saturating_sub(8) {
        return Err(model_file(
            path,
            format!("the safetensors header claims {len} bytes but the file has {file_len}: the file is truncated"),
        ));
    }
    let mut header = vec![0u8; len as usize];
    file.read_exact(&mut header).map_err(io_error(path))?;
    let map: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&header)
        .map_err(|e| model_file(path, format!("the safetensors header is not a JSON object: {e}")))?;
    let mut tensors = Vec::with_capacity(map.len());
    for (name, value) in map {
        if name == "__metadata__" {
            continue;
        }
        let bad = |what: &str| model_file(path, format!("tensor `{name}` in the safetensors header: {what}"));
        let dtype = value["dtype"].as_str().ok_or_else(|| bad("no `dtype`"))?;
        let size = safetensors_dtype_bytes(dtype).ok_or_else(|| bad(&format!("unknown dtype `{dtype}`")))?;
        let dims = value["shape"]
            .as_array()
            .ok_or_else(|| bad("no `shape`"))?
            .iter()
            .map(|d| d.as_u64().ok_or_else(|| bad("a dimension of `shape` is not a whole number")))
            .collect::<Result<Vec<u64>>>()?;
        let elements =
            dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d)).ok_or_else(|| bad("too many elements"))?;
        let file_bytes = elements.checked_mul(size).ok_or_else(|| bad("too many bytes"))?;
        tensors.push(TensorInfo { name, dims, elements, file_bytes });
    }
    Ok(tensors)
}

/// Every tensor of an HF folder: the files the index names, else model.safetensors (herd-tensor's choice,
/// the one the loaders make).
fn folder_tensors(dir: &Path) -> Result<Vec<TensorInfo>> {
    let files = herd_tensor::WeightFiles::find(dir).map_err(|e| model_file(dir, e))?;
    let mut tensors = Vec::new();
    for path in files.paths() {
        tensors.extend(safetensors_header(path)?);
    }
    Ok(tensors)
}

fn read_config(dir: &Path) -> Result<(std::path::PathBuf, String)> {
    let path = dir.join("config.json");
    let text = std::fs::read_to_string(&path).map_err(io_error(&path))?;
    Ok((path, text))
}

/// `safetensors_dtype` of local.rs without a device: f32 on CPU, the registry's dtype (bf16 by default)
/// on accelerators. Returns the name and the bytes an element.
fn safetensors_held(stated: Option<WeightDType>, device: DeviceChoice) -> (&'static str, u64) {
    match (stated, device == DeviceChoice::Cpu) {
        (_, true) => ("f32", 4),
        (Some(WeightDType::F16), false) => ("f16", 2),
        (Some(WeightDType::F32), false) => ("f32", 4),
        (_, false) => ("bf16", 2),
    }
}

fn device_label(device: DeviceChoice) -> String {
    match device {
        DeviceChoice::Cpu => "cpu".into(),
        DeviceChoice::Cuda(i) => format!("cuda:{i}"),
        DeviceChoice::Metal(i) => format!("metal:{i}"),
    }
}

/// A text model as `LocalModel::load` would hold it.
fn text_counts(entry: &ModelEntry, files: &ModelFiles, device: DeviceChoice, choice: WeightChoice) -> Result<Counts> {
    let cpu = device == DeviceChoice::Cpu;
    let gguf = matches!(files, ModelFiles::Gguf(_));
    // LocalModel::load's decision, word for word (its error included).
    let int8 = match choice {
        WeightChoice::Int8 if !cpu => {
            let kind = if matches!(device, DeviceChoice::Metal(_)) { "metal" } else { "cuda" };
            return Err(InferError::Request(format!(
                "`{}`: --weights int8 runs herd-kernels' CPU code; on {kind} use --weights exact (or auto)",
                entry.alias
            )));
        }
        WeightChoice::Int8 => true,
        WeightChoice::Exact => false,
        WeightChoice::Auto => gguf && cpu,
    };
    let mut tally = Tally::default();
    let (config, dense, dense_name) = match files {
        ModelFiles::Gguf(path) => {
            let mut reader =
                std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(path).map_err(io_error(path))?);
            let content = read_gguf(path, &mut reader)?;
            let config = gguf_decoder_config(path, &content)?;
            // GGUF weights are dequantised to f32 on every device.
            let dense = 4;
            let mut embed = None;
            for (name, info) in &content.tensor_infos {
                let dims: Vec<u64> = info.shape.dims().iter().map(|&d| d as u64).collect();
                let elements = mul(&dims);
                let (block, type_size) = (info.ggml_dtype.block_size() as u64, info.ggml_dtype.type_size() as u64);
                let file_bytes = mul(&[elements / block.max(1), type_size]);
                let held = if name == GGUF_EMBED {
                    embed = Some(dims.clone());
                    // `build`: on CPU, looked up from the file's blocks where they do not straddle rows;
                    // else dequantised to f32.
                    if cpu && (config.hidden_size as u64).is_multiple_of(block.max(1)) {
                        file_bytes
                    } else {
                        mul(&[elements, 4])
                    }
                } else if let [rows, cols] = dims[..] {
                    linear_bytes(rows, cols, int8, dense)
                } else {
                    mul(&[elements, dense])
                };
                tally.add(elements, file_bytes, held);
            }
            tied_output(
                &mut tally,
                &content.tensor_infos.keys().map(String::as_str).collect::<Vec<_>>(),
                GGUF_LM_HEAD,
                GGUF_EMBED,
                embed,
                path,
                int8,
                dense,
            )?;
            (config, dense, "f32 (dequantised from GGUF)")
        }
        ModelFiles::HfFolder(dir) => {
            let (config_path, text) = read_config(dir)?;
            let config = parse_hf_config(&config_path, &text)?;
            let (name, dense) = safetensors_held(entry.dtype, device);
            let tensors = folder_tensors(dir)?;
            let mut embed = None;
            for t in &tensors {
                let held = if t.name == HF_EMBED {
                    embed = Some(t.dims.clone());
                    // `build` keeps an HF embedding table in f32 on every device.
                    mul(&[t.elements, 4])
                } else if let [rows, cols] = t.dims[..] {
                    linear_bytes(rows, cols, int8, dense)
                } else {
                    mul(&[t.elements, dense])
                };
                tally.add(t.elements, t.file_bytes, held);
            }
            let names: Vec<&str> = tensors.iter().map(|t| t.name.as_str()).collect();
            tied_output(&mut tally, &names, HF_LM_HEAD, HF_EMBED, embed, dir, int8, dense)?;
            (config, dense, name)
        }
    };
    Ok(Counts {
        parameters: tally.parameters,
        weights_bytes: tally.held,
        loading_bytes: tally.loading(int8),
        held_as: if int8 { "int8 (herd-kernels)".into() } else { dense_name.into() },
        layers: config.num_layers as u64,
        kv_heads: config.num_kv_heads as u64,
        head_dim: config.head_dim as u64,
        vocab: config.vocab_size as u64,
        // The KV cache holds what the decoder computes in: f32 on CPU and for GGUF, else the weights' dtype.
        activation_bytes: dense,
    })
}

/// Without an output layer tensor, `build` makes one from the embedding, held in the layers' format.
#[allow(clippy::too_many_arguments)]
fn tied_output(
    tally: &mut Tally,
    names: &[&str],
    lm_head: &str,
    embed_name: &str,
    embed: Option<Vec<u64>>,
    file: &Path,
    int8: bool,
    dense: u64,
) -> Result<()> {
    if names.contains(&lm_head) {
        return Ok(());
    }
    match embed.as_deref() {
        Some(&[rows, cols]) => {
            tally.add_copy(linear_bytes(rows, cols, int8, dense));
            Ok(())
        }
        Some(dims) => {
            Err(model_file(file, format!("tensor `{embed_name}` has shape {dims:?}, not [vocabulary, hidden]")))
        }
        None => Err(model_file(file, format!("missing tensor `{embed_name}`"))),
    }
}

/// A vision model as `VisionModel::load` would hold it: every tensor at `safetensors_dtype`, read one at
/// a time (candle's VarBuilder over the memory-mapped files).
fn vision_counts(entry: &ModelEntry, files: &ModelFiles, device: DeviceChoice, choice: WeightChoice) -> Result<Counts> {
    // VisionModel::load's refusals, word for word.
    let ModelFiles::HfFolder(dir) = files else {
        return Err(InferError::Request(format!(
            "`{}`: vision models load from an HF folder, not {}",
            entry.alias,
            files.path().display()
        )));
    };
    if choice == WeightChoice::Int8 {
        return Err(InferError::Request(format!(
            "`{}`: vision models run with their exact weights; use --weights exact (or auto)",
            entry.alias
        )));
    }
    let (name, bytes) = safetensors_held(entry.dtype, device);
    // herd-vision's own readers, so the defaults are the load's (Gemma 3's released config.json states
    // only five text keys; the rest are transformers' defaults).
    let (config_path, text) = read_config(dir)?;
    let root: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| model_file(&config_path, format!("not JSON: {e}")))?;
    let (layers, kv_heads, head_dim, vocab) = if root["model_type"].as_str() == Some("gemma3") {
        let t = herd_vision::Gemma3Config::from_json(&text, &config_path)?.text_config;
        (t.num_hidden_layers, t.num_key_value_heads, t.head_dim, t.vocab_size)
    } else {
        let t = herd_vision::Config::from_json(&text, &config_path)?.text_config;
        (t.num_hidden_layers, t.num_key_value_heads, t.head_dim(), t.vocab_size)
    };
    let tensors = folder_tensors(dir)?;
    let parameters = tensors.iter().fold(0u64, |acc, t| acc.saturating_add(t.elements));
    let weights_bytes = mul(&[parameters, bytes]);
    // One tensor at a time: its file copy and its converted copy beside what is already held.
    let transient = tensors.iter().map(|t| t.file_bytes.saturating_add(mul(&[t.elements, bytes]))).max().unwrap_or(0);
    Ok(Counts {
        parameters,
        weights_bytes,
        loading_bytes: weights_bytes.saturating_add(transient),
        held_as: name.into(),
        layers: layers as u64,
        kv_heads: kv_heads as u64,
        head_dim: head_dim as u64,
        vocab: vocab as u64,
        activation_bytes: bytes,
    })
}

/// `MemAvailable` of /proc/meminfo's text, in bytes.
/// What a cgroup v2 limit leaves: `memory.max` (a number, or `max` for none) less `memory.current`.
fn cgroup_room(max: &str, current: &str) -> Option<u64> {
    let max: u64 = max.trim().parse().ok()?;
    let current: u64 = current.trim().parse().ok()?;
    Some(max.saturating_sub(current))
}

fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut words = line["MemAvailable:".len()..].split_whitespace();
    let value: u64 = words.next()?.parse().ok()?;
    let unit = match words.next() {
        Some("kB") | Some("KB") => 1024,
        None => 1,
        Some(_) => return None,
    };
    value.checked_mul(unit)
}

/// A command's standard output when it exits successfully within `limit`; `None` otherwise (it is then
/// killed).
fn run_with_timeout(program: &str, args: &[&str], limit: std::time::Duration) -> Option<String> {
    let mut child = std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let start = std::time::Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                if !status.success() {
                    return None;
                }
                let mut out = String::new();
                child.stdout.take()?.read_to_string(&mut out).ok()?;
                return Some(out);
            }
            Ok(None) if start.elapsed() < limit => std::thread::sleep(std::time::Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

/// Bytes as GB (10⁹), one decimal.
/// GB with one decimal; below a tenth of a GB in MB, so that small numbers do not all read 0.0 GB.
fn gb(bytes: u64) -> String {
    if bytes < 100_000_000 { format!("{:.1} MB", bytes as f64 / 1e6) } else { format!("{:.1} GB", bytes as f64 / 1e9) }
}

/// A whole number with thousands separators: 8192 → "8,192".
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", thousands(n), if n == 1 { one } else { many })
}

/// A parameter count as people say it: "8.2 B", "135 M", "33,024".
fn parameters(n: u64) -> String {
    if n >= 1_000_000_000 {
        format!("{:.1} B", n as f64 / 1e9)
    } else if n >= 1_000_000 {
        format!("{:.0} M", n as f64 / 1e6)
    } else {
        thousands(n)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_cgroup_limit_leaves_max_less_current() {
        assert_eq!(super::cgroup_room("8000000000\n", "3000000000\n"), Some(5_000_000_000));
        assert_eq!(super::cgroup_room("max\n", "3000000000\n"), None);
        assert_eq!(super::cgroup_room("100", "200"), Some(0));
    }

    use super::*;
    use herd_backend::ModelRegistry;
    use herd_test_support::tiny_text::{self, TinyFamily};
    use herd_test_support::tiny_vl;
    use herd_vision::VlFamily;

    /// A registry entry `m` of `family` (with `extra` lines, e.g. a dtype) at `path`.
    fn entry(family: &str, modality: &str, path: &Path, extra: &str) -> ModelEntry {
        let toml = format!(
            "default = \"m\"\n[models.m]\ndescription = \"test\"\nfamily = \"{family}\"\nmodality = \"{modality}\"\n\
             source = {{ path = {path:?} }}\n{extra}"
        );
        ModelRegistry::parse(Path::new("r.toml"), &toml).unwrap().get("m").unwrap().clone()
    }

    fn tiny_text_folder(family: TinyFamily) -> (tempfile::TempDir, ModelFiles, ModelEntry) {
        let dir = tempfile::tempdir().unwrap();
        tiny_text::write_checkpoint(dir.path(), family, tiny_text::SEED).unwrap();
        let entry = entry(family.name(), "text", dir.path(), "dtype = \"bf16\"\n");
        let files = ModelFiles::HfFolder(dir.path().to_path_buf());
        (dir, files, entry)
    }

    const WORK: Workload = Workload { sequences: 4, tokens_per_sequence: 300 };

    fn kernel_int8_bytes(rows: usize, cols: usize) -> u64 {
        herd_kernels::Int8Matrix::quantize(&vec![0.25; rows * cols], rows, cols).unwrap().size_bytes() as u64
    }

    #[test]
    fn the_int8_rule_is_the_kernels_layout() {
        for (rows, cols) in [(16, 32), (17, 64), (1, 96), (256, 64), (100, 128)] {
            assert_eq!(int8_matrix_bytes(rows as u64, cols as u64), kernel_int8_bytes(rows, cols), "{rows} × {cols}");
        }
        // Inputs off the block stay dense.
        assert_eq!(linear_bytes(4, 40, true, 4), 4 * 40 * 4);
    }

    #[test]
    fn a_tiny_hf_folder_on_cpu_counts_every_parameter_at_f32() {
        for family in [TinyFamily::Llama, TinyFamily::Qwen3] {
            let (_dir, files, entry) = tiny_text_folder(family);
            let tensors = tiny_text::tensors(family, tiny_text::SEED);
            let parameters: u64 = tensors.values().map(|(shape, _)| shape.iter().product::<usize>() as u64).sum();
            let e = estimate_memory(&entry, &files, DeviceChoice::Cpu, None, WORK).unwrap();
            assert_eq!(e.parameters, parameters, "{family:?}");
            // A tied output layer is held as its own copy.
            let tied = if family.tied() { (tiny_text::VOCAB * tiny_text::HIDDEN) as u64 } else { 0 };
            assert_eq!(e.weights_bytes, 4 * (parameters + tied), "{family:?}");
            assert_eq!(e.weights_held_as, "f32");
            let per_token = (tiny_text::LAYERS * 2 * tiny_text::KV_HEADS * family.head_dim() * 4) as u64;
            assert_eq!(e.kv_bytes_per_token, per_token);
            assert_eq!(e.kv_cache_bytes, per_token * 4 * 300);
            assert_eq!(e.working_bytes, (4 * tiny_text::VOCAB * 4) as u64 + e.weights_bytes / 10);
            assert_eq!(e.total_bytes, e.weights_bytes + e.kv_cache_bytes + e.working_bytes, "{e:?}");
            assert!(e.loading_bytes < e.total_bytes, "{e:?}");
            // `exact` is what `auto` chooses for safetensors.
            let exact = estimate_memory(&entry, &files, DeviceChoice::Cpu, Some(WeightChoice::Exact), WORK).unwrap();
            assert_eq!(exact, e);
        }
    }

    #[test]
    fn int8_counts_the_kernels_bytes_for_linear_layers_and_f32_for_the_rest() {
        for family in [TinyFamily::Llama, TinyFamily::Qwen3] {
            let (_dir, files, entry) = tiny_text_folder(family);
            let mut expected = 0u64;
            for (name, (shape, _)) in tiny_text::tensors(family, tiny_text::SEED) {
                let n = shape.iter().product::<usize>() as u64;
                expected += match shape[..] {
                    _ if name == HF_EMBED => 4 * n,
                    [rows, cols] => kernel_int8_bytes(rows, cols),
                    _ => 4 * n,
                };
            }
            if family.tied() {
                expected += kernel_int8_bytes(tiny_text::VOCAB, tiny_text::HIDDEN);
            }
            let e = estimate_memory(&entry, &files, DeviceChoice::Cpu, Some(WeightChoice::Int8), WORK).unwrap();
            assert_eq!(e.weights_bytes, expected, "{family:?}");
            assert_eq!(e.weights_held_as, "int8 (herd-kernels)");
            // The registry's `weights` applies when the command line names none.
            let int8_entry = ModelEntry { weights: Some(WeightChoice::Int8), ..entry.clone() };
            assert_eq!(estimate_memory(&int8_entry, &files, DeviceChoice::Cpu, None, WORK).unwrap(), e);
            // Reading the f32 file in before requantising it is the larger need here.
            assert!(e.loading_bytes >= 4 * e.parameters, "{e:?}");
        }
    }

    #[test]
    fn on_an_accelerator_the_registry_dtype_holds_the_layers_and_the_embedding_stays_f32() {
        let (_dir, files, entry) = tiny_text_folder(TinyFamily::Llama);
        let tensors = tiny_text::tensors(TinyFamily::Llama, tiny_text::SEED);
        let parameters: u64 = tensors.values().map(|(shape, _)| shape.iter().product::<usize>() as u64).sum();
        let embed = (tiny_text::VOCAB * tiny_text::HIDDEN) as u64;
        let e = estimate_memory(&entry, &files, DeviceChoice::Cuda(0), None, WORK).unwrap();
        assert_eq!(e.weights_held_as, "bf16");
        assert_eq!(e.weights_bytes, 2 * (parameters - embed) + 4 * embed);
        assert_eq!(
            e.kv_bytes_per_token,
            (tiny_text::LAYERS * 2 * tiny_text::KV_HEADS * (tiny_text::HIDDEN / tiny_text::HEADS) * 2) as u64
        );
        let f16 = ModelEntry { dtype: Some(WeightDType::F16), ..entry.clone() };
        assert_eq!(estimate_memory(&f16, &files, DeviceChoice::Metal(0), None, WORK).unwrap().weights_held_as, "f16");
        // int8 is the CPU's: refused as the load refuses it.
        let err = estimate_memory(&entry, &files, DeviceChoice::Cuda(1), Some(WeightChoice::Int8), WORK).unwrap_err();
        assert!(matches!(err, InferError::Request(_)), "{err}");
        assert!(err.to_string().contains("`m`") && err.to_string().contains("--weights exact"), "{err}");
    }

    #[test]
    fn a_gguf_file_is_counted_from_its_tensor_index() {
        use candle_core::quantized::gguf_file::{self, Value};
        use candle_core::quantized::{GgmlDType, QTensor};
        use candle_core::{Device, Tensor};
        let (vocab, hidden) = (32usize, 64usize);
        let q8 = |rows: usize, cols: usize| {
            let t = Tensor::ones((rows, cols), candle_core::DType::F32, &Device::Cpu).unwrap();
            QTensor::quantize(&t, GgmlDType::Q8_0).unwrap()
        };
        let embed = q8(vocab, hidden);
        let attn_q = q8(hidden, hidden);
        let norm =
            QTensor::quantize(&Tensor::ones(hidden, candle_core::DType::F32, &Device::Cpu).unwrap(), GgmlDType::F32)
                .unwrap();
        let tokens = Value::Array((0..vocab).map(|i| Value::String(format!("t{i}"))).collect());
        let metadata = [
            ("general.architecture", Value::String("llama".into())),
            ("llama.embedding_length", Value::U32(hidden as u32)),
            ("llama.attention.head_count", Value::U32(4)),
            ("llama.attention.head_count_kv", Value::U32(2)),
            ("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5)),
            ("llama.block_count", Value::U32(3)),
            ("llama.context_length", Value::U32(128)),
            ("tokenizer.ggml.tokens", tokens),
        ];
        let refs: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        let mut file = std::fs::File::create(&path).unwrap();
        gguf_file::write(
            &mut file,
            &refs,
            &[(GGUF_EMBED, &embed), ("blk.0.attn_q.weight", &attn_q), ("blk.0.attn_norm.weight", &norm)],
        )
        .unwrap();
        drop(file);
        let entry = entry("llama", "text", &path, "");
        let files = ModelFiles::Gguf(path);
        let parameters = (vocab * hidden + hidden * hidden + hidden) as u64;
        // Q8_0: 34 bytes a block of 32.
        let embed_blocks = (vocab * hidden / 32 * 34) as u64;

        // auto on CPU: int8 layers (the output layer tied, made from the embedding), the embedding looked
        // up from the file's blocks, the norm in f32.
        let e = estimate_memory(&entry, &files, DeviceChoice::Cpu, None, WORK).unwrap();
        assert_eq!(e.parameters, parameters);
        assert_eq!(e.weights_held_as, "int8 (herd-kernels)");
        let int8 =
            embed_blocks + kernel_int8_bytes(hidden, hidden) + 4 * hidden as u64 + kernel_int8_bytes(vocab, hidden);
        assert_eq!(e.weights_bytes, int8);
        assert_eq!(e.kv_bytes_per_token, 3 * 2 * 2 * 16 * 4);
        assert_eq!(e.working_bytes, (4 * vocab * 4) as u64 + int8 / 10);
        // exact on CPU: layers dequantised to f32, the embedding still from the file's blocks.
        let exact = estimate_memory(&entry, &files, DeviceChoice::Cpu, Some(WeightChoice::Exact), WORK).unwrap();
        assert_eq!(exact.weights_held_as, "f32 (dequantised from GGUF)");
        assert_eq!(exact.weights_bytes, embed_blocks + 4 * (hidden * hidden + hidden + vocab * hidden) as u64);
        // On CUDA everything is f32, the KV cache too.
        let cuda = estimate_memory(&entry, &files, DeviceChoice::Cuda(0), None, WORK).unwrap();
        assert_eq!(cuda.weights_bytes, 4 * (parameters + (vocab * hidden) as u64));
        assert_eq!(cuda.kv_bytes_per_token, 3 * 2 * 2 * 16 * 4);
    }

    /// The text model's numbers from a tiny VL config.json: `text_config` first, then the top level.
    fn vl_text_numbers(config: &serde_json::Value) -> (u64, u64, u64, u64) {
        let key = |k: &str| config["text_config"][k].as_u64().or(config[k].as_u64()).unwrap();
        let heads = key("num_attention_heads");
        let head_dim = config["text_config"]["head_dim"]
            .as_u64()
            .or(config["head_dim"].as_u64())
            .unwrap_or(key("hidden_size") / heads);
        (key("num_hidden_layers"), key("num_key_value_heads"), head_dim, key("vocab_size"))
    }

    #[test]
    fn vision_models_count_every_shard_at_the_load_dtype() {
        for (family, registry_family) in [(VlFamily::Qwen2_5Vl, "qwen2_5_vl"), (VlFamily::Gemma3, "gemma3")] {
            let dir = tempfile::tempdir().unwrap();
            let opts = tiny_vl::Options { sharded: true, ..tiny_vl::DEFAULT };
            tiny_vl::write_checkpoint(dir.path(), family.model_type(), tiny_vl::SEED, &opts).unwrap();
            let parameters: u64 = tiny_vl::tensors(family.model_type(), tiny_vl::SEED, &opts)
                .values()
                .map(|(shape, _)| shape.iter().product::<usize>() as u64)
                .sum();
            let (layers, kv_heads, head_dim, vocab) =
                vl_text_numbers(&tiny_vl::config_json(family.model_type(), false));
            let entry = entry(registry_family, "vision", dir.path(), "dtype = \"bf16\"\n");
            let files = ModelFiles::HfFolder(dir.path().to_path_buf());
            let cpu = estimate_memory(&entry, &files, DeviceChoice::Cpu, None, WORK).unwrap();
            assert_eq!(cpu.parameters, parameters, "{family:?}");
            assert_eq!((cpu.weights_bytes, cpu.weights_held_as.as_str()), (4 * parameters, "f32"));
            assert_eq!(cpu.kv_bytes_per_token, layers * 2 * kv_heads * head_dim * 4, "{family:?}");
            assert_eq!(cpu.working_bytes, 4 * vocab * 4 + cpu.weights_bytes / 10);
            let gpu = estimate_memory(&entry, &files, DeviceChoice::Cuda(0), None, WORK).unwrap();
            assert_eq!((gpu.weights_bytes, gpu.weights_held_as.as_str()), (2 * parameters, "bf16"));
            assert_eq!(gpu.kv_bytes_per_token, layers * 2 * kv_heads * head_dim * 2);
            let err = estimate_memory(&entry, &files, DeviceChoice::Cpu, Some(WeightChoice::Int8), WORK).unwrap_err();
            assert!(err.to_string().contains("exact weights"), "{err}");
        }
    }

    #[test]
    fn a_damaged_header_is_refused_by_file_name() {
        let (dir, files, entry) = tiny_text_folder(TinyFamily::Llama);
        let weights = dir.path().join("model.safetensors");
        let mut bytes = std::fs::read(&weights).unwrap();
        bytes[..8].copy_from_slice(&(MAX_HEADER_BYTES + 1).to_le_bytes());
        std::fs::write(&weights, &bytes).unwrap();
        let err = estimate_memory(&entry, &files, DeviceChoice::Cpu, None, WORK).unwrap_err().to_string();
        assert!(err.contains("model.safetensors") && err.contains("header"), "{err}");
        let len = bytes.len() as u64;
        bytes[..8].copy_from_slice(&len.to_le_bytes());
        std::fs::write(&weights, &bytes).unwrap();
        let err = estimate_memory(&entry, &files, DeviceChoice::Cpu, None, WORK).unwrap_err().to_string();
        assert!(err.contains("model.safetensors") && err.contains("truncated"), "{err}");
    }

    #[test]
    fn check_fits_refuses_above_the_limit_with_the_numbers_and_the_options() {
        let (_dir, files, entry) = tiny_text_folder(TinyFamily::Llama);
        let e = estimate_memory(&entry, &files, DeviceChoice::Cpu, None, WORK).unwrap();
        assert!(
            check_fits("tiny-llama", DeviceChoice::Cpu, &e, e.total_bytes, "MemAvailable in /proc/meminfo").is_ok()
        );
        let err = check_fits("tiny-llama", DeviceChoice::Cpu, &e, e.total_bytes - 1, "--max-memory").unwrap_err();
        let InferError::DoesNotFit { needed_bytes, limit_bytes, .. } = &err else { panic!("{err}") };
        assert_eq!((*needed_bytes, *limit_bytes), (e.total_bytes, e.total_bytes - 1));
        let message = err.to_string();
        for expected in [
            "`tiny-llama`",
            "cpu",
            "GB",
            "parameters at f32",
            "4 sequences × 300 tokens",
            "(--max-memory)",
            "`herd models`",
            "--weights int8",
            "--device",
            "--backend openai",
            "--max-memory GB",
        ] {
            assert!(message.contains(expected), "{expected:?} missing from:\n{message}");
        }
        // A real model's numbers read as the brief shows them.
        let big = MemoryEstimate {
            parameters: 8_200_000_000,
            weights_bytes: 16_400_000_000,
            weights_held_as: "bf16".into(),
            kv_cache_bytes: 2_100_000_000,
            working_bytes: 1_600_000_000,
            loading_bytes: 16_500_000_000,
            total_bytes: 20_100_000_000,
            workload: Workload { sequences: 20, tokens_per_sequence: 8192 },
            kv_bytes_per_token: 12_800,
        };
        let message =
            check_fits("llama-8b", DeviceChoice::Cuda(1), &big, 18_000_000_000, "nvidia-smi memory.free of GPU 1")
                .unwrap_err()
                .to_string();
        assert!(
            message.contains(
                "weights 16.4 GB (8.2 B parameters at bf16) + KV cache 2.1 GB (20 sequences × 8,192 tokens) + working 1.6 GB = 20.1 GB"
            ),
            "{message}"
        );
        assert!(
            message.contains("on cuda:1") && message.contains("18.0 GB (nvidia-smi memory.free of GPU 1)"),
            "{message}"
        );
        assert!(!message.contains("loading peaks"), "{message}");
        let loading = MemoryEstimate { loading_bytes: 30_000_000_000, total_bytes: 30_000_000_000, ..big };
        let message = check_fits("llama-8b", DeviceChoice::Cpu, &loading, 1, "x").unwrap_err().to_string();
        assert!(message.contains("loading peaks higher, at 30.0 GB"), "{message}");
    }

    #[test]
    fn free_memory_is_read_on_cpu_and_left_unknown_on_metal() {
        if cfg!(target_os = "linux") {
            let (bytes, source) = available_memory(DeviceChoice::Cpu).expect("/proc/meminfo");
            assert!(bytes > 0);
            assert_eq!(source, "MemAvailable in /proc/meminfo");
        }
        assert_eq!(available_memory(DeviceChoice::Metal(0)), None);
        assert_eq!(mem_available("MemTotal: 10 kB\nMemAvailable:    2048 kB\n"), Some(2048 * 1024));
        assert_eq!(mem_available("MemTotal: 10 kB\n"), None);
        // A missing program is None, not a panic.
        assert_eq!(run_with_timeout("herd-no-such-program", &[], std::time::Duration::from_secs(1)), None);
    }

    #[test]
    fn numbers_are_written_for_people() {
        assert_eq!(thousands(8192), "8,192");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000_000), "1,000,000");
        assert_eq!(parameters(134_515_008), "135 M");
        assert_eq!(parameters(32_763_876_352), "32.8 B");
        assert_eq!(counted(1, "sequence", "sequences"), "1 sequence");
        assert_eq!(gb(20_149_999_999), "20.1 GB");
        assert_eq!(gb(52_340_000), "52.3 MB");
    }
}
