//! The openai backend through batch files: the requests a live run would send, written as OpenAI Batch
//! API / `vllm run-batch` JSONL, and the answers of such a run read back and checked as live replies are.
//!
//! An export line is `{"custom_id": "<unit>@<index>", "method": "POST", "url": "/v1/chat/completions",
//! "body": {…}}`, the body built by `wire` exactly as the live backend builds it (the same prompt,
//! sampling, log-probabilities and model name). An answer line is the Batch API's output, `{"custom_id":
//! …, "response": {"status_code": 200, "body": {…}}, "error": null}`; its body goes through the same
//! reading and checks as a live reply (`wire`, `reply`), and every refusal names the custom id. The
//! answers file is indexed once (each custom id to its line's place, the file hashed on the way) and a
//! line is read again when its request is asked for, so memory holds the index, not the answers; a line
//! is read up to `--max-reply-mb` (and a little for the line's own fields).
//!
//! A unit is answered whole or not at all: of the requests of one call (the runner passes a unit's
//! requests together), those of one unit are taken only when every one has an answer; a unit with some
//! answers missing is named and awaits a later import, and every request of a unit not taken is written to
//! the export file, so the next file answers it whole.

use super::reply::{Refusal, parse_reply};
use super::wire::{Wire, response_format};
use super::{OpenAiOptions, ServedModel, excerpt, with_constraint};
use crate::error::{InferError, Result};
use crate::local::PromptRenderer;
use crate::redact::redact_secrets;
use herd_backend::{
    Backend, BackendError, BackendInfo, BackendLoad, BatchFile, BatchFileRecord, BatchReport, GenerateRequest,
    Generation, ScoreRequest, ScoreResult, SharedBackend, UnitStanding, parse_request_name,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Bytes an answer line may hold beyond its response body (`id`, `custom_id`, `request_id`, `error`).
const LINE_OVERHEAD: u64 = 64 << 10;

/// The openai backend's requests and answers through batch files (`herd run --backend batch`).
pub struct OpenAiBatch {
    model: ServedModel,
    options: OpenAiOptions,
    wire: Wire,
    import: Option<Import>,
    export: Option<Mutex<Export>>,
    state: Mutex<State>,
}

/// An answers file, indexed.
struct Import {
    path: PathBuf,
    record: BatchFileRecord,
    file: Mutex<File>,
    /// Each custom id's lines (more than one: given twice).
    index: HashMap<String, Vec<Line>>,
}

#[derive(Clone, Copy)]
struct Line {
    offset: u64,
    len: usize,
    /// 1-based, for messages.
    number: u64,
}

/// The requests file being written: under a temporary name beside it until [`BatchFile::finish`].
struct Export {
    path: PathBuf,
    temporary: PathBuf,
    writer: Option<BufWriter<File>>,
}

impl Drop for Export {
    fn drop(&mut self) {
        // Not finished (the session failed): no half-written file is left where the export belongs.
        if self.writer.take().is_some() {
            let _ = std::fs::remove_file(&self.temporary);
        }
    }
}

#[derive(Default)]
struct State {
    report: BatchReport,
    /// Every custom id the session asked for.
    asked: HashSet<String>,
    finished: bool,
}

/// What the answers file holds for one request.
enum Lookup {
    Missing,
    /// Given on more than one line: none is taken.
    Twice(Vec<u64>),
    Found(Line),
}

impl OpenAiBatch {
    /// The backend for `model` with `options` (its endpoints are not used); `import` is a file of
    /// answers, `export` where the requests without one are written (at least one of the two).
    /// `renderer` is needed for [`super::ScoreApi::Completions`] only.
    pub fn new(
        model: ServedModel,
        options: OpenAiOptions,
        renderer: Option<PromptRenderer>,
        import: Option<&Path>,
        export: Option<&Path>,
    ) -> Result<Self> {
        if import.is_none() && export.is_none() {
            return Err(InferError::Request(
                "a batch file needs --export FILE (write the requests) or --import FILE (read their answers), or both"
                    .into(),
            ));
        }
        let wire = Wire::new(&options, &model.alias, renderer)?;
        if options.max_reply_bytes == 0 {
            return Err(InferError::Request("max_reply_bytes (--max-reply-mb) must be more than 0".into()));
        }
        let mut report = BatchReport { model: options.served_model.clone(), ..BatchReport::default() };
        let import = import.map(|path| Import::read(path, options.max_reply_bytes, &mut report)).transpose()?;
        let export = match export {
            Some(path) => {
                if let Some(import) = &import
                    && same_file(path, &import.path)
                {
                    return Err(InferError::Request(format!(
                        "--export {} is the --import file: writing the requests would overwrite the answers; fix: export to another file",
                        path.display()
                    )));
                }
                Some(Mutex::new(Export::create(path)?))
            }
            None => None,
        };
        Ok(OpenAiBatch {
            model,
            options,
            wire,
            import,
            export,
            state: Mutex::new(State { report, ..State::default() }),
        })
    }

    pub fn options(&self) -> &OpenAiOptions {
        &self.options
    }

    /// The answers file's record (path, SHA-256, size), when there is one.
    pub fn import_record(&self) -> Option<&BatchFileRecord> {
        self.import.as_ref().map(|i| &i.record)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lookup(&self, id: &str) -> Lookup {
        let Some(lines) = self.import.as_ref().and_then(|i| i.index.get(id)) else { return Lookup::Missing };
        match lines[..] {
            [line] => Lookup::Found(line),
            _ => Lookup::Twice(lines.iter().map(|l| l.number).collect()),
        }
    }

    /// The response body of an answer line, or why it is not taken (naming the custom id's problem, not
    /// the id: the caller adds it).
    fn response_body(&self, line: Line) -> std::result::Result<Value, String> {
        let import = self.import.as_ref().expect("a found line has a file");
        let mut bytes = vec![0u8; line.len];
        {
            let mut file = import.file.lock().unwrap_or_else(|p| p.into_inner());
            file.seek(SeekFrom::Start(line.offset))
                .and_then(|_| file.read_exact(&mut bytes))
                .map_err(|e| format!("{}: line {} could not be read again: {e}", import.path.display(), line.number))?;
        }
        let text = String::from_utf8(bytes).map_err(|_| format!("line {} is not UTF-8", line.number))?;
        let answer = parse_reply(&text).map_err(|e| format!("line {} is not JSON ({e})", line.number))?;
        if let Some(error) = answer.get("error").filter(|e| !e.is_null()) {
            return Err(format!("the batch run reports an error: {}", excerpt(&error.to_string())));
        }
        let response = answer.get("response").filter(|r| r.is_object()).ok_or("no `response` object")?;
        let status = response.get("status_code").and_then(Value::as_u64).ok_or("no `response.status_code`")?;
        let body = response.get("body").cloned().unwrap_or(Value::Null);
        if !(200..300).contains(&status) {
            return Err(format!("HTTP {status}: {}", excerpt(&body.to_string())));
        }
        if !body.is_object() {
            return Err(format!("HTTP {status} without a `response.body` object"));
        }
        // The cap a live reply's body has (`--max-reply-mb`), on the body as written here.
        let size = body.to_string().len() as u64;
        if size > self.options.max_reply_bytes {
            return Err(format!(
                "the answer's body is {size} bytes, longer than {}, the most herd reads of one reply; fix: raise --max-reply-mb if such replies are expected, or limit the server's output (max_tokens)",
                super::megabytes(self.options.max_reply_bytes, "--max-reply-mb")
            ));
        }
        Ok(body)
    }

    /// Every request's result, answered unit by unit: `line` gives a request's path and body for the
    /// export, `read` reads its answer's body. See the module docs for the rules.
    fn answer_each<R, T>(
        &self,
        requests: &[R],
        name_of: impl Fn(&R) -> Option<&String>,
        line: impl Fn(&R) -> Result<(&'static str, Value)>,
        read: impl Fn(&R, &Value) -> std::result::Result<T, Refusal>,
    ) -> Vec<herd_backend::Result<T>> {
        let mut results: Vec<Option<herd_backend::Result<T>>> = requests.iter().map(|_| None).collect();
        // The requests of each unit, in order of first appearance.
        let mut units: Vec<(String, Vec<usize>)> = Vec::new();
        for (i, request) in requests.iter().enumerate() {
            let Some((unit, _)) = name_of(request).and_then(|n| parse_request_name(n)) else {
                results[i] = Some(Err(BackendError::Request(
                    "a request without a name (`unit@index`) cannot go through a batch file".into(),
                )));
                continue;
            };
            match units.iter_mut().find(|(u, _)| u == unit) {
                Some((_, indices)) => indices.push(i),
                None => units.push((unit.to_owned(), vec![i])),
            }
        }
        for (unit, indices) in units {
            let names: Vec<&String> = indices.iter().map(|&i| name_of(&requests[i]).expect("named above")).collect();
            let lookups: Vec<Lookup> = names.iter().map(|n| self.lookup(n)).collect();
            self.state().asked.extend(names.iter().map(|n| (*n).clone()));
            let missing: Vec<&String> =
                names.iter().zip(&lookups).filter(|(_, l)| matches!(l, Lookup::Missing)).map(|(n, _)| *n).collect();
            let taken = if missing.is_empty() {
                let mut all = true;
                for ((&i, name), lookup) in indices.iter().zip(&names).zip(lookups) {
                    let result = match lookup {
                        Lookup::Found(at) => self.read_answer(name, at, &requests[i], &read),
                        Lookup::Twice(lines) => Err(self.refuse(
                            name,
                            format!("given on lines {} of the file; a request has one answer", join(&lines)),
                            false,
                        )),
                        Lookup::Missing => unreachable!("none missing"),
                    };
                    all &= result.is_ok();
                    results[i] = Some(result);
                }
                if all {
                    self.state().report.answers_taken += indices.len() as u64;
                }
                all
            } else {
                if missing.len() < names.len() {
                    let shown: Vec<&str> = missing.iter().take(5).map(|s| s.as_str()).collect();
                    let more =
                        if missing.len() > 5 { format!(" and {} more", missing.len() - 5) } else { String::new() };
                    self.state().report.problem(format!(
                        "unit `{unit}`: the file answers {} of its {} requests (missing {}{more}); the unit is not stored: a later file must answer all of them",
                        names.len() - missing.len(),
                        names.len(),
                        shown.join(", ")
                    ));
                }
                for (&i, name) in indices.iter().zip(&names) {
                    results[i] = Some(Err(BackendError::Pending((*name).clone())));
                }
                false
            };
            if !taken {
                self.write_requests(&indices, requests, &name_of, &line, &mut results);
            }
        }
        results.into_iter().map(|r| r.expect("every request has a result")).collect()
    }

    /// An answer read and checked, or refused (the refusal named in the report).
    fn read_answer<R, T>(
        &self,
        name: &str,
        at: Line,
        request: &R,
        read: &impl Fn(&R, &Value) -> std::result::Result<T, Refusal>,
    ) -> herd_backend::Result<T> {
        let body = self.response_body(at).map_err(|problem| self.refuse(name, problem, true))?;
        read(request, &body).map_err(|refusal| {
            let problem = match refusal {
                Refusal::Bad(problem) => {
                    format!("unexpected reply ({problem}): {}", excerpt(&redact_secrets(&body.to_string(), &[])))
                }
                Refusal::OverLimit(problem) => problem,
            };
            self.refuse(name, problem, true)
        })
    }

    /// The error of a refused answer; `report` names it among the problems too (a custom id given twice
    /// was named when the file was read).
    fn refuse(&self, name: &str, problem: String, report: bool) -> BackendError {
        let text = redact_secrets(&format!("batch answer `{name}`: {problem}"), &[]);
        if report {
            self.state().report.problem(text.clone());
        }
        BackendError::Request(text)
    }

    /// Writes the requests `indices` to the export file, if there is one; a request whose body cannot be
    /// built fails with why.
    fn write_requests<R, T>(
        &self,
        indices: &[usize],
        requests: &[R],
        name_of: &impl Fn(&R) -> Option<&String>,
        line: &impl Fn(&R) -> Result<(&'static str, Value)>,
        results: &mut [Option<herd_backend::Result<T>>],
    ) {
        let Some(export) = &self.export else { return };
        let mut export = export.lock().unwrap_or_else(|p| p.into_inner());
        for &i in indices {
            let name = name_of(&requests[i]).expect("named");
            let written = line(&requests[i]).map_err(BackendError::from).and_then(|(path, body)| {
                let entry = json!({"custom_id": name, "method": "POST", "url": format!("/v1{path}"), "body": body});
                export.write(&entry)
            });
            match written {
                Ok(()) => self.state().report.requests_written += 1,
                Err(e) => results[i] = Some(Err(e)),
            }
        }
    }
}

impl Import {
    /// Indexes the answers file: each line's custom id, with the problems of lines that have none.
    fn read(path: &Path, max_reply_bytes: u64, report: &mut BatchReport) -> Result<Self> {
        let open = |p: &Path| {
            File::open(p).map_err(|e| {
                InferError::Request(format!("--import {}: cannot read the answers file ({e})", p.display()))
            })
        };
        let file = open(path)?;
        if !file.metadata().is_ok_and(|m| m.is_file()) {
            return Err(InferError::Request(format!("--import {}: not a regular file", path.display())));
        }
        let limit = max_reply_bytes.saturating_add(LINE_OVERHEAD);
        let mut reader = BufReader::with_capacity(1 << 20, open(path)?);
        let mut hasher = Sha256::new();
        let mut index: HashMap<String, Vec<Line>> = HashMap::new();
        let (mut offset, mut number, mut line) = (0u64, 0u64, Vec::new());
        loop {
            line.clear();
            let (len, over) = read_line(&mut reader, &mut line, limit, &mut hasher)
                .map_err(|e| InferError::Request(format!("--import {}: {e}", path.display())))?;
            if len == 0 {
                break;
            }
            number += 1;
            let at = Line { offset, len: line.len(), number };
            offset += len as u64;
            if over {
                report.problem(format!(
                    "{}: line {number} is longer than {}, the most herd reads of one answer; fix: raise --max-reply-mb if such answers are expected",
                    path.display(),
                    super::megabytes(max_reply_bytes, "--max-reply-mb")
                ));
                continue;
            }
            let text = String::from_utf8_lossy(&line);
            if text.trim().is_empty() {
                continue;
            }
            let id = parse_reply(&text)
                .ok()
                .and_then(|v| v.get("custom_id").and_then(Value::as_str).map(str::to_owned))
                .filter(|id| !id.is_empty());
            match id {
                Some(id) => {
                    report.answers += 1;
                    index.entry(id).or_default().push(at);
                }
                None => report.problem(redact_secrets(
                    &format!(
                        "{}: line {number} is not a batch answer (a JSON object with a `custom_id`): {}",
                        path.display(),
                        excerpt(&text)
                    ),
                    &[],
                )),
            }
        }
        let mut twice: Vec<(&String, &Vec<Line>)> = index.iter().filter(|(_, lines)| lines.len() > 1).collect();
        twice.sort_by_key(|(_, lines)| lines[0].number);
        for (id, lines) in twice {
            let numbers: Vec<u64> = lines.iter().map(|l| l.number).collect();
            report.problem(redact_secrets(
                &format!(
                    "custom id `{id}` is on lines {} of {}: a request has one answer, so none of them is taken",
                    join(&numbers),
                    path.display()
                ),
                &[],
            ));
        }
        let record =
            BatchFileRecord { path: path.display().to_string(), sha256: hex::encode(hasher.finalize()), bytes: offset };
        Ok(Import { path: path.to_path_buf(), record, file: Mutex::new(file), index })
    }
}

/// Reads one line (through its `\n`) into `line`, keeping at most `limit` bytes of it and hashing every
/// byte: the bytes the line took in the file (0 at the end) and whether it was longer than `limit`.
fn read_line(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    limit: u64,
    hasher: &mut Sha256,
) -> std::io::Result<(usize, bool)> {
    let (mut taken, mut over) = (0usize, false);
    loop {
        let buffer = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buffer.is_empty() {
            return Ok((taken, over));
        }
        let (chunk, done) = match buffer.iter().position(|&b| b == b'\n') {
            Some(at) => (&buffer[..=at], true),
            None => (buffer, false),
        };
        hasher.update(chunk);
        if !over {
            if (line.len() + chunk.len()) as u64 > limit.saturating_add(1) {
                over = true;
                line.clear();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let n = chunk.len();
        taken += n;
        reader.consume(n);
        if done {
            return Ok((taken, over));
        }
    }
}

impl Export {
    fn create(path: &Path) -> Result<Self> {
        let name = path.file_name().and_then(|n| n.to_str()).filter(|n| !n.is_empty()).ok_or_else(|| {
            InferError::Request(format!("--export {}: give a file name for the requests", path.display()))
        })?;
        if path.is_dir() {
            return Err(InferError::Request(format!(
                "--export {}: a folder; give a file name for the requests",
                path.display()
            )));
        }
        let temporary = path.with_file_name(format!(".{name}.tmp"));
        let file = File::create(&temporary)
            .map_err(|e| InferError::Request(format!("--export {}: cannot write there ({e})", path.display())))?;
        Ok(Export { path: path.to_path_buf(), temporary, writer: Some(BufWriter::with_capacity(1 << 20, file)) })
    }

    fn write(&mut self, entry: &Value) -> herd_backend::Result<()> {
        let writer = self.writer.as_mut().ok_or_else(|| BackendError::Request("the export is closed".into()))?;
        serde_json::to_writer(&mut *writer, entry)
            .map_err(std::io::Error::other)
            .and_then(|()| writer.write_all(b"\n"))
            .map_err(|source| BackendError::Io { path: self.temporary.clone(), source })
    }

    /// Writes the file out under its own name.
    fn finish(&mut self) -> Result<BatchFileRecord> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| InferError::Io { path, source }
        };
        if let Some(writer) = self.writer.take() {
            let file = writer.into_inner().map_err(|e| InferError::Io {
                path: self.temporary.clone(),
                source: std::io::Error::other(e.to_string()),
            })?;
            file.sync_all().map_err(io(&self.temporary))?;
            std::fs::rename(&self.temporary, &self.path).map_err(io(&self.path))?;
        }
        let bytes = std::fs::metadata(&self.path).map_err(io(&self.path))?.len();
        Ok(BatchFileRecord {
            path: self.path.display().to_string(),
            sha256: herd_backend::sha256_file(&self.path)?,
            bytes,
        })
    }
}

/// Whether two paths name one file (the second may not exist yet).
fn same_file(a: &Path, b: &Path) -> bool {
    let canonical = |p: &Path| {
        p.canonicalize().ok().or_else(|| {
            let parent = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            Some(parent.canonicalize().ok()?.join(p.file_name()?))
        })
    };
    match (canonical(a), canonical(b)) {
        (Some(a), Some(b)) => a == b,
        _ => a == b,
    }
}

fn join(numbers: &[u64]) -> String {
    numbers.iter().map(u64::to_string).collect::<Vec<_>>().join(" and ")
}

/// Every result, or the first failure (the [`Backend`] contract: a group answers whole).
fn all<T>(results: Vec<herd_backend::Result<T>>) -> herd_backend::Result<Vec<T>> {
    results.into_iter().collect()
}

impl SharedBackend for OpenAiBatch {
    fn score_each(&self, group: &[ScoreRequest]) -> Vec<herd_backend::Result<ScoreResult>> {
        self.answer_each(
            group,
            |r| r.name.as_ref(),
            |r| self.wire.score_request(r),
            |r, body| self.wire.read_score(body, &r.answers),
        )
    }

    fn generate_each(&self, batch: &[GenerateRequest]) -> Vec<herd_backend::Result<Generation>> {
        let format = self.options.structured_output;
        self.answer_each(
            batch,
            |r| r.name.as_ref(),
            |r| {
                let mut body = self.wire.generate_request(r)?;
                if let Some(schema) = &r.schema {
                    body["response_format"] = response_format(schema, format);
                }
                Ok((super::wire::CHAT_PATH, body))
            },
            |r, body| self.wire.read_generation(body).map(|g| with_constraint(g, r.schema.is_some())),
        )
    }

    /// Answers are read, not waited for: one batch at a time is enough.
    fn request_slots(&self) -> usize {
        1
    }

    fn load(&self) -> BackendLoad {
        BackendLoad::default()
    }
}

impl BatchFile for OpenAiBatch {
    fn finish(&self, standing: &dyn Fn(&str) -> UnitStanding) -> herd_backend::Result<BatchReport> {
        let mut state = self.state();
        if !state.finished {
            state.finished = true;
            if let Some(export) = &self.export {
                let record = export.lock().unwrap_or_else(|p| p.into_inner()).finish()?;
                state.report.export = Some(record);
            }
            if let Some(import) = &self.import {
                state.report.import = Some(import.record.clone());
                // Answers the session did not ask for, by where their unit stands; unknown ones by name.
                let mut unknown: BTreeMap<u64, String> = BTreeMap::new();
                let (mut stored, mut planned) = (0u64, 0u64);
                for (id, lines) in &import.index {
                    if state.asked.contains(id) {
                        continue;
                    }
                    let place = parse_request_name(id).map_or(UnitStanding::Unknown, |(unit, _)| standing(unit));
                    match place {
                        UnitStanding::Stored => stored += lines.len() as u64,
                        UnitStanding::Planned => planned += lines.len() as u64,
                        UnitStanding::Unknown => {
                            unknown.insert(lines[0].number, id.clone());
                        }
                    }
                }
                state.report.answers_already_stored = stored;
                state.report.answers_not_needed = planned;
                for (line, id) in unknown {
                    state.report.problem(redact_secrets(
                        &format!(
                            "custom id `{id}` (line {line}) is not a request of this run (another experiment, model or shard, or not a name herd writes); it is left alone"
                        ),
                        &[],
                    ));
                }
            }
        }
        Ok(state.report.clone())
    }
}

impl Backend for OpenAiBatch {
    fn score(&mut self, group: &[ScoreRequest]) -> herd_backend::Result<Vec<ScoreResult>> {
        all(self.score_each(group))
    }

    fn generate(&mut self, batch: &[GenerateRequest]) -> herd_backend::Result<Vec<Generation>> {
        all(self.generate_each(batch))
    }

    fn batch_file(&self) -> Option<&dyn BatchFile> {
        Some(self)
    }

    fn info(&self) -> BackendInfo {
        let mut files = Vec::new();
        if let Some(import) = &self.import {
            files.push(format!("answers {} (sha256 {})", import.record.path, import.record.sha256));
        }
        if let Some(export) = &self.export {
            let path = export.lock().unwrap_or_else(|p| p.into_inner()).path.display().to_string();
            files.push(format!("requests to {path}"));
        }
        BackendInfo {
            // The openai backend's requests and checks, sent later: a run may mix batch and live sessions.
            backend: "openai".into(),
            model: self.model.alias.clone(),
            family: self.model.family.clone(),
            device: format!("batch file: {}", files.join("; ")),
            vision: self.model.vision,
            compute: super::served_compute(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_read_whole_up_to_its_limit_and_past_it_only_hashed() {
        let text = b"{\"a\":1}\nxxxxxxxxxxxxxxxxxxxx\n{\"b\":2}";
        let mut reader = BufReader::with_capacity(4, &text[..]);
        let mut hasher = Sha256::new();
        let mut lines = Vec::new();
        loop {
            let mut line = Vec::new();
            let (n, over) = read_line(&mut reader, &mut line, 10, &mut hasher).unwrap();
            if n == 0 {
                break;
            }
            lines.push((n, over, String::from_utf8(line).unwrap()));
        }
        assert_eq!(
            lines,
            vec![(8, false, "{\"a\":1}\n".into()), (21, true, String::new()), (7, false, "{\"b\":2}".into())]
        );
        assert_eq!(hex::encode(hasher.finalize()), hex::encode(Sha256::digest(text)), "every byte is hashed");
    }
}
