//! Progress bars: one for the whole run and one per family (or baseline pool), with rate and ETA. On a
//! terminal they redraw in place; without one (Slurm, nohup, a pipe) the same numbers come as plain
//! lines on stderr, one every [`PLAIN_EVERY`] (`HERD_PROGRESS_SECONDS` to change it) and one at the end,
//! so a batch job's log shows how far a run is.

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often a plain progress line is written without a terminal.
pub const PLAIN_EVERY: Duration = Duration::from_secs(30);

pub struct Progress {
    multi: MultiProgress,
    overall: ProgressBar,
    bars: Mutex<BTreeMap<String, ProgressBar>>,
    visible: bool,
    /// Plain lines instead of bars: shown, but stderr is no terminal.
    plain: Option<Mutex<PlainLines>>,
}

/// When the plain lines started and last wrote, and the last status message written.
struct PlainLines {
    started: Instant,
    last: Instant,
    every: Duration,
    message: String,
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).expect("valid progress template").progress_chars("=> ")
}

impl Progress {
    pub fn new(visible: bool) -> Self {
        Self::with_terminal(visible, std::io::stderr().is_terminal())
    }

    /// [`Progress::new`] with the terminal question answered (tests ask for the plain lines).
    pub fn with_terminal(visible: bool, terminal: bool) -> Self {
        let multi = MultiProgress::with_draw_target(if visible && terminal {
            ProgressDrawTarget::stderr_with_hz(4)
        } else {
            ProgressDrawTarget::hidden()
        });
        let overall = multi.add(ProgressBar::new(0));
        overall.set_style(style("{prefix:>18} [{bar:32}] {pos}/{len} units  {per_sec:>9}  ETA {eta:>4}  {msg}"));
        overall.set_prefix("all");
        let plain = (visible && !terminal).then(|| {
            let every = std::env::var("HERD_PROGRESS_SECONDS")
                .ok()
                .and_then(|s| s.parse::<f64>().ok())
                .filter(|s| s.is_finite() && *s >= 0.0)
                .map_or(PLAIN_EVERY, Duration::from_secs_f64);
            let now = Instant::now();
            Mutex::new(PlainLines { started: now, last: now, every, message: String::new() })
        });
        Progress { multi, overall, bars: Mutex::new(BTreeMap::new()), visible, plain }
    }

    /// `[  31.0 s] 120/1080 units (11%), 3.9 units/s, ETA 4.1 min`: the overall bar as a line.
    fn plain_line(&self, lines: &mut PlainLines, force: bool) {
        let now = Instant::now();
        if !force && now.duration_since(lines.last) < lines.every {
            return;
        }
        lines.last = now;
        let (done, total) = (self.overall.position(), self.overall.length().unwrap_or(0));
        let secs = now.duration_since(lines.started).as_secs_f64();
        let rate = if secs > 0.0 { done as f64 / secs } else { 0.0 };
        let eta = if rate > 0.0 && total > done {
            format!(", ETA {}", duration_text((total - done) as f64 / rate))
        } else {
            String::new()
        };
        let share = if total > 0 { format!(" ({:.0}%)", 100.0 * done as f64 / total as f64) } else { String::new() };
        eprintln!("[{secs:>7.1} s] {done}/{total} units{share}, {rate:.2} units/s{eta}");
    }

    pub fn is_visible(&self) -> bool {
        self.visible
    }

    /// Sets the units the run will do (pending units only, so rate and ETA mean this session's work).
    pub fn set_total(&self, total: u64) {
        self.overall.set_length(total);
    }

    /// A bar for one family; created on first use.
    pub fn family(&self, name: &str, total: u64) {
        let mut bars = self.bars.lock().expect("progress lock");
        bars.entry(name.to_owned()).or_insert_with(|| {
            let bar = self.multi.add(ProgressBar::new(total));
            bar.set_style(style("{prefix:>18} [{bar:32}] {pos}/{len}  {per_sec:>9}  ETA {eta:>4}"));
            bar.set_prefix(name.to_owned());
            bar
        });
    }

    /// `n` units of `family` are done.
    pub fn advance(&self, family: &str, n: u64) {
        if let Some(bar) = self.bars.lock().expect("progress lock").get(family) {
            bar.inc(n);
        }
        self.overall.inc(n);
        if let Some(plain) = &self.plain {
            let mut lines = plain.lock().expect("progress lock");
            let done = self.overall.length().is_some_and(|len| self.overall.position() >= len);
            self.plain_line(&mut lines, done);
        }
    }

    /// A status line under the overall bar (e.g. the baseline pool being built).
    pub fn message(&self, text: impl Into<String>) {
        let text = text.into();
        if let Some(plain) = &self.plain {
            let mut lines = plain.lock().expect("progress lock");
            if !text.is_empty() && text != lines.message {
                eprintln!("{text}");
                lines.message = text.clone();
            }
        }
        self.overall.set_message(text);
    }

    /// A line printed above the bars.
    pub fn println(&self, text: impl AsRef<str>) {
        if self.plain.is_some() {
            eprintln!("{}", text.as_ref());
        } else if self.visible {
            let _ = self.multi.println(text);
        }
    }

    pub fn finish(&self) {
        for bar in self.bars.lock().expect("progress lock").values() {
            bar.finish();
        }
        self.overall.finish_with_message("");
    }
}

/// `12.9 s`, `4.2 min`, `1.3 h`: a duration as progress lines and run summaries print it.
pub fn duration_text(secs: f64) -> String {
    if secs < 120.0 {
        format!("{secs:.1} s")
    } else if secs < 7200.0 {
        format!("{:.1} min", secs / 60.0)
    } else {
        format!("{:.1} h", secs / 3600.0)
    }
}
