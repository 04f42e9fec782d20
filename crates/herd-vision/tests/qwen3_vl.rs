//! End-to-end tests on a tiny random Qwen3-VL checkpoint with the real file layout and tensor names
//! (`herd_test_support::tiny_vl`); the checks are the ones every family passes (`support::checks`).

mod support;

use herd_vision::VlFamily;
use support::checks;

const FAMILY: VlFamily = VlFamily::Qwen3Vl;

#[test]
fn logits_have_vocab_shape_and_are_finite() {
    checks::logits_have_vocab_shape_and_are_finite(FAMILY);
}

#[test]
fn same_input_twice_gives_identical_logits() {
    checks::same_input_twice_gives_identical_logits(FAMILY);
}

#[test]
fn the_image_changes_the_logits() {
    checks::the_image_changes_the_logits(FAMILY);
}

#[test]
fn a_prefix_and_its_continuations_equal_whole_prompts() {
    checks::a_prefix_and_its_continuations_equal_whole_prompts(FAMILY);
}

#[test]
fn prompt_and_image_must_fit_together() {
    checks::prompt_and_image_must_fit_together(FAMILY);
}

#[test]
fn tied_embeddings_in_a_single_file_load() {
    checks::tied_embeddings_in_a_single_file_load(FAMILY);
}

#[test]
fn missing_files_are_named() {
    checks::missing_files_are_named(FAMILY);
}

#[test]
fn a_missing_tensor_is_named() {
    checks::a_missing_tensor_is_named(FAMILY, "model.visual.deepstack_merger_list.1.norm.bias");
}

#[test]
fn inconsistent_files_are_reported() {
    checks::inconsistent_files_are_reported(FAMILY);
}
