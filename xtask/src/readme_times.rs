//! README's table of measured times, rewritten by `cargo xtask bench replicate --readme`: one row per CPU,
//! path and profile, between two markers, so that the times a newcomer reads are the ones a command
//! printed on a named CPU, never retyped. A rerun replaces its own row and keeps the other machines' rows.

use anyhow::{Result, bail};

/// The lines that open and close the table in README.md.
pub const BEGIN: &str = "<!-- bench-replicate:begin (cargo xtask bench replicate --readme rewrites this table) -->";
pub const END: &str = "<!-- bench-replicate:end -->";

const HEADER: &str = "| CPU | path | profile | measured | compile (fresh clone) | model fetch | conformity | minimal groups | both studies |\n|---|---|---|---|---|---|---|---|---|";

/// One machine's measured row.
pub struct TimesRow {
    pub cpu: String,
    pub path: String,
    pub profile: String,
    /// `YYYY-MM-DD`.
    pub date: String,
    /// Minutes, or `None` when nothing was compiled or fetched in this run (the old row's cell is kept).
    pub compile: Option<f64>,
    pub fetch: Option<f64>,
    pub conformity: Option<String>,
    pub minimal_group: Option<String>,
    pub total: f64,
}

impl TimesRow {
    fn key(&self) -> [&str; 3] {
        [&self.cpu, &self.path, &self.profile]
    }

    fn cells(&self, old: Option<&[String]>) -> Vec<String> {
        let kept = |i: usize| old.and_then(|c| c.get(i)).cloned().unwrap_or_else(|| "not measured".into());
        let minutes = |m: Option<f64>, i: usize| m.map_or_else(|| kept(i), duration);
        vec![
            self.cpu.clone(),
            format!("`{}`", self.path),
            self.profile.clone(),
            self.date.clone(),
            minutes(self.compile, 4),
            minutes(self.fetch, 5),
            self.conformity.clone().unwrap_or_else(|| kept(6)),
            self.minimal_group.clone().unwrap_or_else(|| kept(7)),
            duration(self.total),
        ]
    }
}

/// The cells of a markdown table row (`| a | b |`), trimmed; `None` for other lines.
fn cells(line: &str) -> Option<Vec<String>> {
    let inner = line.trim().strip_prefix('|')?.strip_suffix('|')?;
    Some(inner.split('|').map(|c| c.trim().to_owned()).collect())
}

/// `readme` with `row` written into the marked table (replacing the row of the same CPU, path and
/// profile, keeping the others in their order, a new one last).
pub fn update(readme: &str, row: &TimesRow) -> Result<String> {
    let (Some(begin), Some(end)) = (readme.find(BEGIN), readme.find(END)) else {
        bail!("README.md has no measured-times table: add the lines\n{BEGIN}\n{END}\nwhere it belongs");
    };
    if end < begin {
        bail!("README.md: the line {END:?} comes before {BEGIN:?}");
    }
    let body = &readme[begin + BEGIN.len()..end];
    let mut rows: Vec<Vec<String>> =
        body.lines().filter_map(cells).filter(|c| c.len() == 9 && c[0] != "CPU" && !c[0].starts_with("---")).collect();
    let key = row.key();
    let same = |c: &Vec<String>| c[0] == key[0] && c[1].trim_matches('`') == key[1] && c[2] == key[2];
    match rows.iter().position(same) {
        Some(i) => rows[i] = row.cells(Some(&rows[i])),
        None => rows.push(row.cells(None)),
    }
    let mut table = format!("{BEGIN}\n{HEADER}\n");
    for r in rows {
        table.push_str(&format!("| {} |\n", r.join(" | ")));
    }
    Ok(format!("{}{table}{}", &readme[..begin], &readme[end..]))
}

/// Today's date (UTC) as `YYYY-MM-DD`, from `date` (herd-report has a civil-date conversion, but xtask
/// links no heavy crate).
pub fn today() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%F"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|d| d.len() == 10)
        .unwrap_or_else(|| "undated".into())
}

/// Minutes as README's times table and `cargo xtask bench replicate` print them (hours past two).
pub(crate) fn duration(minutes: f64) -> String {
    if minutes >= 120.0 { format!("{:.1} h", minutes / 60.0) } else { format!("{minutes:.1} min") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cpu: &str, path: &str, compile: Option<f64>, total: f64) -> TimesRow {
        TimesRow {
            cpu: cpu.into(),
            path: path.into(),
            profile: "quick".into(),
            date: "2026-12-02".into(),
            compile,
            fetch: None,
            conformity: Some("6.7 min (qwen2.5-coder-1.5b, 474 units)".into()),
            minimal_group: Some("5.9 min (smollm2-135m, 32 units)".into()),
            total,
        }
    }

    #[test]
    fn a_rerun_replaces_its_own_row_and_keeps_the_others() {
        let readme = format!("# herd\n\nintro\n\n{BEGIN}\n{END}\n\nafter\n");
        let once = update(&readme, &row("AMD EPYC, 2 cores", "avx2", Some(14.2), 30.0)).unwrap();
        let twice =
            update(&once, &row("Intel(R) Xeon(R) Processor, 2 cores", "avx512-vnni", Some(12.0), 12.6)).unwrap();
        // The same machine again, with herd already built: its compile time stays as measured before.
        let again = update(&twice, &row("AMD EPYC, 2 cores", "avx2", None, 28.0)).unwrap();
        let lines: Vec<&str> = again.lines().filter(|l| l.starts_with("| ") && !l.starts_with("| CPU")).collect();
        assert_eq!(lines.len(), 2, "{again}");
        assert!(
            lines[0].starts_with("| AMD EPYC, 2 cores | `avx2` | quick | 2026-12-02 | 14.2 min | not measured |"),
            "{again}"
        );
        assert!(lines[0].ends_with("| 28.0 min |"), "{again}");
        assert!(lines[1].contains("`avx512-vnni`") && lines[1].contains("12.0 min"), "{again}");
        assert!(again.starts_with("# herd\n\nintro\n\n") && again.ends_with(&format!("{END}\n\nafter\n")), "{again}");
    }

    #[test]
    fn a_readme_without_the_markers_is_refused_with_the_lines_to_add() {
        let err = update("# herd\n", &row("x", "avx2", None, 1.0)).unwrap_err().to_string();
        assert!(err.contains("bench-replicate:begin") && err.contains("bench-replicate:end"), "{err}");
    }
}
