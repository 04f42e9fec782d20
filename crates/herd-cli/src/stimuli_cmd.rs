use anyhow::{Context, Result, bail};
use herd_design::{ConformityExperiment, Experiment, StimuliConfig, Task, load_experiment};
use herd_stimuli::{Pool, Stimulus, generate, render_each, render_png, stimulus_key};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct StimuliArgs {
    /// Which task: lines, color or dots.
    #[arg(long)]
    task: Task,
    /// How many images to render.
    #[arg(long, default_value_t = 10)]
    count: u32,
    /// Seed of the images: the same seed gives byte-identical files.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Difficulty level (1 = easiest) of the difficulty pool; without it, images of the general pool.
    #[arg(long)]
    difficulty: Option<u32>,
    /// Take the stimulus parameters from this conformity experiment file instead of the protocol defaults.
    #[arg(long)]
    experiment: Option<PathBuf>,
    /// Output folder (created if needed).
    #[arg(long)]
    out: PathBuf,
}

fn stimuli_config(experiment: Option<&Path>, task: Task) -> Result<StimuliConfig> {
    match experiment {
        Some(path) => match load_experiment(path)?.experiment {
            Experiment::Conformity(ConformityExperiment { stimuli, .. }) => Ok(stimuli),
            Experiment::MinimalGroup(_) => bail!("{} is a minimal-group experiment: it has no stimuli", path.display()),
        },
        None => Ok(StimuliConfig::protocol(vec![task])),
    }
}

pub fn run(args: StimuliArgs) -> Result<()> {
    if u64::from(args.count) > herd_design::MAX_GRID_COUNT {
        bail!(
            "--count {}: at most {} images at a time (each is drawn in memory, then written); run several --seed values for more",
            args.count,
            herd_design::MAX_GRID_COUNT
        );
    }
    let config = stimuli_config(args.experiment.as_deref(), args.task)?;
    let pool = match args.difficulty {
        Some(level) => Pool::Difficulty(level),
        None => Pool::General,
    };
    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
    let bar = ProgressBar::new(u64::from(args.count)).with_style(
        ProgressStyle::with_template("{prefix} {bar:40} {pos}/{len} images, {per_sec}, eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_prefix(format!("rendering {}", args.task));
    let stimuli: Vec<Stimulus> = (0..args.count)
        .map(|index| {
            let id = match pool {
                Pool::General => format!("{}-s{}-{index:04}", args.task, args.seed),
                Pool::Difficulty(level) => format!("{}-s{}-d{level:02}-{index:04}", args.task, args.seed),
            };
            let mut rng = stimulus_key("herd-stimuli", args.seed, args.task, pool, index).rng();
            generate(args.task, &config, pool, &id, &mut rng)
        })
        .collect::<Result<_, _>>()?;
    let files: Vec<Result<String>> = render_each(&stimuli, |stimulus| {
        let file = format!("{}.png", stimulus.id);
        let path = args.out.join(&file);
        std::fs::write(&path, render_png(stimulus)?).with_context(|| format!("cannot write {}", path.display()))?;
        bar.inc(1);
        Ok(file)
    });
    bar.finish_and_clear();
    let index_path = args.out.join("stimuli.jsonl");
    let mut index = std::io::BufWriter::new(
        std::fs::File::create(&index_path).with_context(|| format!("cannot create {}", index_path.display()))?,
    );
    for (stimulus, file) in stimuli.iter().zip(files) {
        writeln!(index, "{}", stimulus.record(&file?))?;
    }
    index.flush()?;
    println!("wrote {} {} images and {}", args.count, args.task, index_path.display());
    Ok(())
}
