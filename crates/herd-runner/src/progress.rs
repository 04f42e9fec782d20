//! Progress bars: one for the whole run and one per family (or baseline pool), with rate and ETA.

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::BTreeMap;
use std::sync::Mutex;

pub struct Progress {
    multi: MultiProgress,
    overall: ProgressBar,
    bars: Mutex<BTreeMap<String, ProgressBar>>,
    visible: bool,
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).expect("valid progress template").progress_chars("=> ")
}

impl Progress {
    pub fn new(visible: bool) -> Self {
        let multi = MultiProgress::with_draw_target(if visible {
            ProgressDrawTarget::stderr_with_hz(4)
        } else {
            ProgressDrawTarget::hidden()
        });
        let overall = multi.add(ProgressBar::new(0));
        overall.set_style(style("{prefix:>18} [{bar:32}] {pos}/{len} units  {per_sec:>9}  ETA {eta:>4}  {msg}"));
        overall.set_prefix("all");
        Progress { multi, overall, bars: Mutex::new(BTreeMap::new()), visible }
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
    }

    /// A status line under the overall bar (e.g. the baseline pool being built).
    pub fn message(&self, text: impl Into<String>) {
        self.overall.set_message(text.into());
    }

    /// A line printed above the bars.
    pub fn println(&self, text: impl AsRef<str>) {
        if self.visible {
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
