//! Rendered stimuli measured at the pixel level against their recorded parameters.

use herd_design::{Answer, StimuliConfig, Task};
use herd_stimuli::{Pool, Stimulus, TaskParams, generate, render, render_png, stimulus_key, text_rendering};
use image::{GrayImage, Luma};
use imageproc::region_labelling::{Connectivity, connected_components};

fn config() -> StimuliConfig {
    StimuliConfig::protocol(Task::ALL.to_vec())
}

fn stimuli(task: Task, pool: Pool, count: u32) -> Vec<Stimulus> {
    (0..count)
        .map(|i| {
            generate(task, &config(), pool, &format!("t{i}"), &mut stimulus_key("pixels", 9, task, pool, i).rng())
                .unwrap()
        })
        .collect()
}

fn pools(levels: u32) -> Vec<Pool> {
    std::iter::once(Pool::General).chain((1..=levels).map(Pool::Difficulty)).collect()
}

#[test]
fn lines_have_their_recorded_lengths() {
    for pool in pools(10) {
        for s in stimuli(Task::Lines, pool, 6) {
            let TaskParams::Lines { reference_length, distractor_length, centres, baseline, .. } = s.params else {
                panic!()
            };
            assert_ne!(reference_length, distractor_length);
            let image = render(&s).into_luma8();
            assert_eq!(image.dimensions(), (450, 960));
            let expected = match s.correct {
                Answer::A => [reference_length, reference_length, distractor_length],
                Answer::B => [distractor_length, reference_length, reference_length],
            };
            for (slot, &cx) in centres.iter().enumerate() {
                // Dark pixels in the line's column, above the labels.
                let dark: Vec<u32> = (0..=baseline).filter(|&y| image.get_pixel(cx, y)[0] < 128).collect();
                let measured = dark.len() as u32;
                assert!(
                    measured.abs_diff(expected[slot]) <= 1,
                    "{}: slot {slot} measured {measured} expected {}",
                    s.id,
                    expected[slot]
                );
                assert_eq!(dark.last().copied(), Some(baseline), "lines start at the shared baseline");
                // Greyscale: the line is pure black, the canvas pure white.
                assert_eq!(image.get_pixel(cx, baseline)[0], 0);
            }
            assert_eq!(image.get_pixel(135, 100)[0], 255);
        }
    }
}

#[test]
fn colour_squares_have_their_recorded_colours() {
    for pool in pools(10) {
        for s in stimuli(Task::Color, pool, 6) {
            let TaskParams::Color { reference_rgb, distractor_rgb } = s.params else { panic!() };
            assert_ne!(reference_rgb, distractor_rgb, "distractor never equals the reference");
            let image = render(&s).into_rgb8();
            assert_eq!(image.dimensions(), (870, 332));
            let expected = match s.correct {
                Answer::A => [reference_rgb, reference_rgb, distractor_rgb],
                Answer::B => [distractor_rgb, reference_rgb, reference_rgb],
            };
            for (slot, rect) in s.boxes.iter().enumerate() {
                // Every inner pixel has the colour; the edge is black.
                for y in (rect[1] + 4)..(rect[3] - 4) {
                    for x in [rect[0] + 4, (rect[0] + rect[2]) / 2, rect[2] - 5] {
                        assert_eq!(image.get_pixel(x, y).0, expected[slot], "{} slot {slot} at {x},{y}", s.id);
                    }
                }
                assert_eq!(image.get_pixel(rect[0], (rect[1] + rect[3]) / 2).0, [0, 0, 0]);
            }
            if let Pool::Difficulty(level) = pool {
                let spread = config().color.difficulty_spreads[level as usize - 1] as i32;
                for ch in 0..3 {
                    assert!((i32::from(reference_rgb[ch]) - i32::from(distractor_rgb[ch])).abs() <= spread);
                }
            }
        }
    }
}

#[test]
fn dot_boxes_hold_their_recorded_counts_without_overlap() {
    for pool in pools(10) {
        for s in stimuli(Task::Dots, pool, 4) {
            let TaskParams::Dots { reference_count, distractor_count, ref dots, .. } = s.params else { panic!() };
            assert_ne!(reference_count, distractor_count);
            let image = render(&s).into_rgb8();
            assert_eq!(image.dimensions(), (1170, 431));
            let expected = match s.correct {
                Answer::A => [reference_count, reference_count, distractor_count],
                Answer::B => [distractor_count, reference_count, reference_count],
            };
            for (slot, rect) in s.boxes.iter().enumerate() {
                assert_eq!(dots[slot].len() as u32, expected[slot]);
                // Connected components of black pixels inside the box's edge: one per dot.
                let (w, h) = (rect[2] - rect[0] - 8, rect[3] - rect[1] - 8);
                let inside = GrayImage::from_fn(w, h, |x, y| {
                    let p = image.get_pixel(rect[0] + 4 + x, rect[1] + 4 + y);
                    Luma([if p.0[0] < 128 { 255 } else { 0 }])
                });
                let labels = connected_components(&inside, Connectivity::Eight, Luma([0]));
                let components = labels.pixels().map(|p| p[0]).max().unwrap_or(0);
                assert_eq!(components, expected[slot], "{} slot {slot}", s.id);
            }
        }
    }
}

#[test]
fn same_stream_same_png_bytes() {
    for task in Task::ALL {
        for pool in [Pool::General, Pool::Difficulty(3)] {
            let a = stimuli(task, pool, 3);
            let b = stimuli(task, pool, 3);
            for (x, y) in a.iter().zip(&b) {
                assert_eq!(render_png(x).unwrap(), render_png(y).unwrap());
            }
            // Different images of a pool differ.
            assert_ne!(render_png(&a[0]).unwrap(), render_png(&a[1]).unwrap());
        }
    }
}

#[test]
fn correct_answer_is_a_fair_coin_and_recorded() {
    let all = stimuli(Task::Color, Pool::General, 400);
    let a = all.iter().filter(|s| s.correct == Answer::A).count();
    assert!((150..=250).contains(&a), "{a} of 400 with A correct");
}

#[test]
fn difficulty_pools_stay_within_their_spread_and_index_tracks_difficulty() {
    let c = config();
    for (level, &d) in c.lines.difficulty_spreads.iter().enumerate() {
        for s in stimuli(Task::Lines, Pool::Difficulty(level as u32 + 1), 20) {
            let TaskParams::Lines { distractor_length, .. } = s.params else { panic!() };
            let diff = distractor_length.abs_diff(300);
            assert!((1..=d).contains(&diff));
            assert_eq!(s.difficulty_index, 1.0 / f64::from(diff));
            assert_eq!(s.difficulty_level, Some(level as u32 + 1));
        }
    }
    for s in stimuli(Task::Lines, Pool::General, 50) {
        let TaskParams::Lines { distractor_length, .. } = s.params else { panic!() };
        assert!(distractor_length <= 150 || distractor_length >= 450);
        assert_eq!(s.difficulty_level, None);
    }
    for s in stimuli(Task::Dots, Pool::Difficulty(10), 20) {
        let TaskParams::Dots { distractor_count, .. } = s.params else { panic!() };
        assert!(distractor_count.abs_diff(10) <= 20);
    }
    for s in stimuli(Task::Color, Pool::General, 20) {
        let TaskParams::Color { reference_rgb, distractor_rgb } = s.params else { panic!() };
        let dist: f64 = reference_rgb
            .iter()
            .zip(distractor_rgb)
            .map(|(&a, b)| (f64::from(a) - f64::from(b)).powi(2))
            .sum::<f64>()
            .sqrt();
        assert!((s.difficulty_index - (255.0 * 3f64.sqrt() - dist)).abs() < 1e-9);
    }
    assert!(matches!(
        generate(
            Task::Lines,
            &c,
            Pool::Difficulty(11),
            "x",
            &mut stimulus_key("e", 1, Task::Lines, Pool::General, 0).rng()
        ),
        Err(herd_stimuli::StimulusError::NoSuchLevel { level: 11, levels: 10, .. })
    ));
}

#[test]
fn text_rendering_states_the_same_values() {
    let s = &stimuli(Task::Lines, Pool::General, 1)[0];
    let TaskParams::Lines { distractor_length, .. } = s.params else { panic!() };
    let text = text_rendering(s);
    assert!(text.contains("REFERENCE LINE: a vertical line 300 pixels long"), "{text}");
    assert!(text.contains(&format!("a vertical line {distractor_length} pixels long")));

    let s = &stimuli(Task::Color, Pool::General, 1)[0];
    let TaskParams::Color { reference_rgb: [r, g, b], .. } = s.params else { panic!() };
    assert!(text_rendering(s).contains(&format!("REFERENCE COLOR: a square of color RGB({r}, {g}, {b})")));

    for s in stimuli(Task::Dots, Pool::Difficulty(1), 5) {
        let TaskParams::Dots { ref dots, .. } = s.params else { panic!() };
        let text = text_rendering(&s);
        // Three 10×10 grids whose digits add up to each box's count.
        let sections: Vec<&str> = text.split(':').collect();
        assert!(text.contains("A:\n") && text.contains("REFERENCE BOX:\n") && text.contains("B:\n"));
        let grids: Vec<u32> = ["A:\n", "REFERENCE BOX:\n", "B:\n"]
            .iter()
            .map(|label| {
                let start = text.find(label).unwrap() + label.len();
                text[start..].lines().take(10).flat_map(|l| l.chars()).filter_map(|c| c.to_digit(10)).sum()
            })
            .collect();
        assert!(sections.len() >= 4);
        assert_eq!(grids, dots.iter().map(|d| d.len() as u32).collect::<Vec<_>>());
    }
}

#[test]
fn jsonl_record_has_the_documented_fields() {
    let s = &stimuli(Task::Dots, Pool::Difficulty(2), 1)[0];
    let record = s.record("x.png");
    for field in [
        "id",
        "task",
        "file",
        "correct",
        "boxes",
        "reference_count",
        "distractor_count",
        "dots",
        "difficulty_level",
        "difficulty_index",
        "text",
    ] {
        assert!(record.get(field).is_some(), "missing {field}");
    }
    assert_eq!(record["boxes"]["REFERENCE"].as_array().unwrap().len(), 4);
    assert_eq!(record["correct"], if s.correct == Answer::A { "A" } else { "B" });
}
