//! Image pools: the general pool and the difficulty pools of one task, and which image a trial shows.

use crate::params::{Pool, Stimulus, StimulusError, generate, stimulus_key};
use herd_design::rand::Rng;
use herd_design::{
    ConformityExperiment, ConformityTrial, ImageSelection, StimuliConfig, Task, UnitKey, difficulty_images_per_level,
    difficulty_levels, factor,
};

/// `count` images of `pool`, image i drawn from its own stream.
pub fn build_pool(
    experiment: &str,
    master_seed: u64,
    task: Task,
    config: &StimuliConfig,
    pool: Pool,
    count: u32,
) -> Result<Vec<Stimulus>, StimulusError> {
    (0..count).map(|index| candidate(experiment, master_seed, task, config, pool, index)).collect()
}

/// Image `index` of `pool`, drawn from its own stream: the same image whichever others are drawn, so a
/// baseline filter can walk the candidates in order and resume anywhere.
pub fn candidate(
    experiment: &str,
    master_seed: u64,
    task: Task,
    config: &StimuliConfig,
    pool: Pool,
    index: u32,
) -> Result<Stimulus, StimulusError> {
    let id = image_id(task, pool, index);
    generate(task, config, pool, &id, &mut stimulus_key(experiment, master_seed, task, pool, index).rng())
}

/// The id of image `index` of `pool`: `lines-general-0042`, `dots-d03-0007`.
fn image_id(task: Task, pool: Pool, index: u32) -> String {
    match pool {
        Pool::General => format!("{task}-general-{index:04}"),
        Pool::Difficulty(level) => format!("{task}-d{level:02}-{index:04}"),
    }
}

/// The candidate image `id` names (as [`candidate`] names them), drawn again from its own stream, so
/// an image a run stored by id can be shown again without its pool; `None` when `id` is not such a
/// name.
pub fn candidate_by_id(
    experiment: &str,
    master_seed: u64,
    config: &StimuliConfig,
    id: &str,
) -> Option<Result<Stimulus, StimulusError>> {
    let mut parts = id.splitn(3, '-');
    let task: Task = parts.next()?.parse().ok()?;
    let pool = match parts.next()? {
        "general" => Pool::General,
        level => Pool::Difficulty(level.strip_prefix('d')?.parse().ok()?),
    };
    let index: u32 = parts.next()?.parse().ok()?;
    // Only the one spelling: `lines-general-42` or `colour-…` would name another image's stream.
    (image_id(task, pool, index) == id).then(|| candidate(experiment, master_seed, task, config, pool, index))
}

/// The pools of one task. For a real run these are the images that passed a model's baseline filter;
/// [`ImagePools::preview`] gives the unfiltered candidates, to show prompts before any model is involved.
#[derive(Debug, Clone)]
pub struct ImagePools {
    pub task: Task,
    pub general: Vec<Stimulus>,
    /// `difficulty[level - 1]`.
    pub difficulty: Vec<Vec<Stimulus>>,
}

impl ImagePools {
    pub fn preview(experiment: &ConformityExperiment, task: Task) -> Result<Self, StimulusError> {
        let (name, seed) = (&experiment.experiment.name, experiment.experiment.seed);
        let stimuli = &experiment.stimuli;
        let general = build_pool(name, seed, task, stimuli, Pool::General, stimuli.general_pool_size)?;
        let per_level = difficulty_images_per_level(experiment, task);
        let difficulty = (1..=difficulty_levels(experiment, task))
            .map(|level| build_pool(name, seed, task, stimuli, Pool::Difficulty(level), per_level))
            .collect::<Result<_, _>>()?;
        Ok(ImagePools { task, general, difficulty })
    }

    /// The image a trial shows, or `None` when the pool has no image for it (e.g. no image with the trial's
    /// correct answer survived the baseline filter). Balanced trials draw from a stream shared by every
    /// level of the family at the same task, N and trial, so conditions are compared on the same images.
    pub fn select(&self, key: &UnitKey, trial: &ConformityTrial) -> Option<&Stimulus> {
        match trial.image {
            ImageSelection::Balanced { correct } => {
                let candidates: Vec<&Stimulus> = self.general.iter().filter(|s| s.correct == correct).collect();
                if candidates.is_empty() {
                    return None;
                }
                let pick = key.stream_over(&[factor::TASK, factor::N], "image").rng().random_range(0..candidates.len());
                Some(candidates[pick])
            }
            ImageSelection::DifficultySlot { level, index } => {
                self.difficulty.get(level.checked_sub(1)? as usize)?.get(index as usize)
            }
        }
    }
}

/// Applies `f` to every stimulus on all cores and returns the results in input order. Images are
/// independent, and drawing and PNG encoding dominate the cost of a pool.
pub fn render_each<R: Send>(stimuli: &[Stimulus], f: impl Fn(&Stimulus) -> R + Sync) -> Vec<R> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = stimuli.len().div_ceil(workers).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> =
            stimuli.chunks(chunk).map(|part| scope.spawn(|| part.iter().map(&f).collect::<Vec<R>>())).collect();
        handles.into_iter().flat_map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_id_draws_the_same_candidate_again_and_only_its_own_spelling_does() {
        let config = StimuliConfig::protocol(vec![Task::Lines, Task::Dots]);
        for (task, pool, index) in [(Task::Lines, Pool::General, 42), (Task::Dots, Pool::Difficulty(3), 7)] {
            let original = candidate("exp", 9, task, &config, pool, index).unwrap();
            let again = candidate_by_id("exp", 9, &config, &original.id).expect("a candidate's id").unwrap();
            assert_eq!(again, original);
        }
        assert_eq!(candidate("exp", 9, Task::Dots, &config, Pool::Difficulty(3), 7).unwrap().id, "dots-d03-0007");
        for not_an_id in ["lines-general-42", "colour-general-0001", "lines-x-0001", "lines-d1-0001", "lines", ""] {
            assert!(candidate_by_id("exp", 9, &config, not_an_id).is_none(), "{not_an_id}");
        }
    }
}
