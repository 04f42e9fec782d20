//! `cargo xtask bench stimuli` runs this example in release: how fast difficulty pools are built. The peer is the rendering alone
//! without PNG encoding, measured in the same run, so the printed ratio shows what encoding costs.

use anyhow::Result;
use herd_design::{StimuliConfig, Task};
use herd_stimuli::{Pool, build_pool, render, render_each, render_png};
use std::time::Instant;

const IMAGES: u32 = 500;
const LEVELS: u32 = 10;

fn main() -> Result<()> {
    let config = StimuliConfig::protocol(Task::ALL.to_vec());
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("{IMAGES}-image difficulty pool per task ({LEVELS} levels × {}), {workers} threads", IMAGES / LEVELS);
    println!("{:<6} {:>12} {:>14} {:>14} {:>10}", "task", "pool (s)", "images/s", "draw-only/s", "ratio");
    for task in Task::ALL {
        let start = Instant::now();
        let stimuli: Vec<_> = (1..=LEVELS)
            .map(|level| build_pool("bench", 1, task, &config, Pool::Difficulty(level), IMAGES / LEVELS))
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .flatten()
            .collect();
        let bytes: usize = render_each(&stimuli, |s| render_png(s).map_or(0, |p| p.len())).into_iter().sum();
        let full = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let pixels: usize = render_each(&stimuli, |s| render(s).as_bytes().len()).into_iter().sum();
        let draw_only = start.elapsed().as_secs_f64();
        println!(
            "{:<6} {:>12.3} {:>14.0} {:>14.0} {:>9.2}×   ({} KiB of PNG, {} MiB of pixels)",
            task.as_str(),
            full,
            f64::from(IMAGES) / full,
            f64::from(IMAGES) / draw_only,
            full / draw_only,
            bytes / 1024,
            pixels / (1024 * 1024)
        );
    }
    Ok(())
}
