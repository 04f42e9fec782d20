//! llama.cpp's OpenAI-compatible server (`llama-cpp-python[server]`) serving the default SmolLM2 GGUF on
//! 127.0.0.1, for the openai backend's tests and `cargo xtask bench openai`. The Python environment is
//! made once by `cargo xtask llama-server` (which `.ci/run` calls).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The Python with `llama_cpp.server`: `$HERD_LLAMA_SERVER_PYTHON`, else the environment
/// `cargo xtask llama-server` makes under the herd cache.
pub fn server_python() -> PathBuf {
    if let Some(p) = std::env::var_os("HERD_LLAMA_SERVER_PYTHON") {
        return PathBuf::from(p);
    }
    let python = herd_backend::herd_cache_dir().join("venvs/llama-server/bin/python");
    assert!(
        python.is_file(),
        "llama.cpp's server is not installed at {}: run `cargo xtask llama-server` once (it builds llama-cpp-python[server] into the herd cache; .ci/run does this)",
        python.display()
    );
    python
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free local port")
}

pub struct LlamaServer {
    child: Option<Child>,
    pub port: u16,
    model: PathBuf,
    log: PathBuf,
}

impl LlamaServer {
    /// Starts the server on a free port and waits until it answers.
    pub fn start(model: &Path) -> Self {
        Self::start_on(model, free_port())
    }

    pub fn start_on(model: &Path, port: u16) -> Self {
        let log = std::env::temp_dir().join(format!("herd-llama-server-{port}.log"));
        let mut server = LlamaServer { child: None, port, model: model.to_path_buf(), log };
        server.restart();
        server
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Kills the server (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and waits until it answers.
    pub fn restart(&mut self) {
        self.kill();
        let log = std::fs::File::create(&self.log).expect("server log file");
        let child = Command::new(server_python())
            .args(["-m", "llama_cpp.server", "--host", "127.0.0.1", "--port", &self.port.to_string()])
            .arg("--model")
            .arg(&self.model)
            // Logprobs need the logits of every position; one context for every request. Keys and
            // values cached in f32 (GGML type 0), as herd keeps them: llama.cpp's default f16 cache
            // alone moved P(A) of a test prompt from 0.569 to 0.601.
            .args([
                "--type_k",
                "0",
                "--type_v",
                "0",
                "--logits_all",
                "true",
                "--n_ctx",
                "2048",
                "--n_threads",
                "2",
                "--n_batch",
                "512",
                "--verbose",
                "false",
            ])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("starting llama_cpp.server");
        self.child = Some(child);
        let started = Instant::now();
        while !models_answer(self.port) {
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                panic!(
                    "llama_cpp.server exited ({status}) before answering: {}",
                    std::fs::read_to_string(&self.log).unwrap_or_default()
                );
            }
            assert!(
                started.elapsed() < Duration::from_secs(180),
                "llama_cpp.server did not answer within 3 minutes: {}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Whether `GET /v1/models` answers 200.
fn models_answer(port: u16) -> bool {
    crate::http::get(port, "/v1/models", Duration::from_secs(2)).is_some_and(|(status, _)| status == 200)
}
