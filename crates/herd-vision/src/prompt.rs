//! Token-level prompt handling the families share: expanding `<|image_pad|>`, finding the image's
//! tokens, refusing image tokens without an image, and the 3-D (MRoPE) positions of a prompt.

use crate::error::VisionError;

/// Replaces the one `image_token_id` in `token_ids` by `count` copies of it, as the Qwen VL processors
/// does with `<|image_pad|>` in the rendered chat text.
///
/// Errors if the prompt holds no image token or more than one (this crate handles one image a prompt).
pub fn expand_image_pad(token_ids: &[u32], image_token_id: u32, count: usize) -> Result<Vec<u32>, VisionError> {
    let positions: Vec<usize> =
        token_ids.iter().enumerate().filter(|&(_, &t)| t == image_token_id).map(|(i, _)| i).collect();
    match positions.as_slice() {
        [at] => {
            let mut out = Vec::with_capacity(token_ids.len() + count.saturating_sub(1));
            out.extend_from_slice(&token_ids[..*at]);
            out.extend(std::iter::repeat_n(image_token_id, count));
            out.extend_from_slice(&token_ids[at + 1..]);
            Ok(out)
        }
        [] => Err(VisionError::Prompt {
            message: format!("the token ids hold no image token (id {image_token_id})"),
            fix: "render the chat template with an image entry so the prompt contains <|vision_start|><|image_pad|><|vision_end|>",
        }),
        many => Err(VisionError::Prompt {
            message: format!(
                "the token ids hold {} image tokens (id {image_token_id}), expected exactly one to expand",
                many.len()
            ),
            fix: "put one image in the prompt, and pass token ids that were not expanded yet",
        }),
    }
}

/// Where the image's tokens lie in an expanded prompt: (first index, count).
pub(crate) fn image_span(
    token_ids: &[u32],
    image_token_id: u32,
    expected: usize,
) -> Result<(usize, usize), VisionError> {
    let first = token_ids.iter().position(|&t| t == image_token_id);
    let total = token_ids.iter().filter(|&&t| t == image_token_id).count();
    let Some(first) = first else {
        return Err(VisionError::Prompt {
            message: format!("an image was given but the token ids hold no image token (id {image_token_id})"),
            fix: "render the prompt with <|vision_start|><|image_pad|><|vision_end|> where the image goes",
        });
    };
    let contiguous = token_ids[first..first + total.min(token_ids.len() - first)].iter().all(|&t| t == image_token_id);
    if total != expected || !contiguous {
        return Err(VisionError::Prompt {
            message: format!(
                "the token ids hold {total} image tokens (id {image_token_id}){}, but the image needs {expected} in one run",
                if contiguous { "" } else { " not in one run" }
            ),
            fix: "pass the prompt with a single <|image_pad|> (it is expanded) or expanded by expand_image_tokens for this image",
        });
    }
    Ok((first, total))
}

/// The three position rows (temporal, height, width) the Qwen VL models' `get_rope_index` gives one prompt
/// (Qwen2-VL, Qwen2.5-VL and Qwen3-VL agree for a still image).
///
/// Text tokens get the same position on all three rows, counting up. The image's tokens, starting at
/// index `s`, get `s + (t, row, column)` of their merged grid cell; text after the image continues
/// from the largest position so far plus one. `image` is `(first index, grid_thw, merge_size)`.
pub fn mrope_positions(len: usize, image: Option<(usize, [usize; 3], usize)>) -> [Vec<u32>; 3] {
    let mut rows: [Vec<u32>; 3] = [Vec::with_capacity(len), Vec::with_capacity(len), Vec::with_capacity(len)];
    let push_text = |rows: &mut [Vec<u32>; 3], n: usize, start: u32| {
        for i in 0..n {
            for row in rows.iter_mut() {
                row.push(start + i as u32);
            }
        }
    };
    match image {
        None => {
            push_text(&mut rows, len, 0);
        }
        Some((first, [t, h, w], merge)) => {
            let (gt, gh, gw) = (t, h / merge, w / merge);
            push_text(&mut rows, first, 0);
            let base = first as u32;
            for ti in 0..gt {
                for hi in 0..gh {
                    for wi in 0..gw {
                        rows[0].push(base + ti as u32);
                        rows[1].push(base + hi as u32);
                        rows[2].push(base + wi as u32);
                    }
                }
            }
            let n_img = gt * gh * gw;
            let next = base + gt.max(gh).max(gw) as u32;
            let rest = len.saturating_sub(first + n_img);
            push_text(&mut rows, rest, next);
        }
    }
    rows
}

/// A prompt given without an image must hold no image token.
pub(crate) fn refuse_image_tokens(token_ids: &[u32], image_token_id: u32) -> Result<(), VisionError> {
    if token_ids.contains(&image_token_id) {
        return Err(VisionError::Prompt {
            message: format!("the token ids hold image tokens (id {image_token_id}) but no image was given"),
            fix: "pass the prepared image, or render the prompt without an image",
        });
    }
    Ok(())
}
