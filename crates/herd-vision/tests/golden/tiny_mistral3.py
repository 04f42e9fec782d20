"""Golden values from HF transformers on herd's tiny Mistral3 checkpoint, for tests/mistral3.rs.

    cargo run -p herd-vision --example write_tiny_vl -- /tmp/tiny-vl
    python3 -m venv /tmp/herd-vl-golden
    /tmp/herd-vl-golden/bin/pip install -r crates/herd-infer/tests/golden/requirements-transformers.txt
    /tmp/herd-vl-golden/bin/python crates/herd-vision/tests/golden/tiny_mistral3.py /tmp/tiny-vl

CPU, float32, eager attention, the PIL image processor (`PixtralImageProcessorPil`; transformers 5's
`PixtralImageProcessor` is the torchvision one, which resamples differently). `PixtralProcessor` needs
torchvision, which the pinned requirements leave out, so its two steps that matter are done here as it does
them: the image processor gets `patch_size * spatial_merge_size` as its patch size, and `[IMG]` is replaced
as `replace_image_token` replaces it (copied below). Writes tiny_mistral3.json beside this script:
- from the tiny checkpoint (mistral3/), loaded from the released tensor names (`language_model.model.*`,
  `language_model.lm_head`, `vision_tower.*`, `multi_modal_projector.*`; loading must report no missing or
  unexpected weight): the last-position logits for the prompt of mistral3_inputs.json with the HF
  processor's pixel values of image.png, with herd's pixel values, and without the image;
- the expanded token ids of the prompt, and the HF processor's pixel values of image.png ([3, H, W]);
- per stimulus (stimuli/{lines,color,dots}.png) through Mistral-Small-3.1's processor settings
  (mistral3_processor/): the size, the resized size, an FNV-1a fingerprint of PIL's bicubic resize (RGB
  bytes), three pixel rows (channel 0 first row, channel 1 middle row, channel 2 last row) and the sum of
  every (channel, row) over its columns (float64).
`tiny_mistral3_matches_transformers` and `stimuli_pixel_values_match_the_pixtral_processor` in
tests/mistral3.rs compare against the JSON.
"""
import json
import pathlib
import sys

import numpy as np
import torch
import transformers
from PIL import Image
from transformers import AutoTokenizer, Mistral3ForConditionalGeneration, PixtralImageProcessorPil

HERE = pathlib.Path(__file__).parent


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def rounded(values, digits=6):
    return [round(float(x), digits) for x in values]


def replace_image_token(height, width, patch_size, merge):
    """transformers' PixtralProcessor.replace_image_token (5.24), for one image of the given size."""
    patch_size = patch_size * merge
    num_height_tokens = height // patch_size
    num_width_tokens = width // patch_size
    replace_tokens = [["[IMG]"] * num_width_tokens + ["[IMG_BREAK]"]] * num_height_tokens
    replace_tokens = [item for sublist in replace_tokens for item in sublist]
    replace_tokens[-1] = "[IMG_END]"
    return "".join(replace_tokens)


def process(folder, image, merge):
    processor = PixtralImageProcessorPil.from_pretrained(folder)
    patch = processor.patch_size["height"] * merge
    return processor(images=[image], patch_size={"height": patch, "width": patch}, return_tensors="pt")


def model_values(folder, inputs):
    config = json.loads((folder / "config.json").read_text())
    merge = config["spatial_merge_size"]
    patch = config["vision_config"]["patch_size"]
    processed = process(folder, Image.open(folder.parent / "image.png").convert("RGB"), merge)
    hf_pixels = processed["pixel_values"].float()
    sizes = processed["image_sizes"]
    assert sizes.tolist() == [inputs["resized"]], (sizes.tolist(), inputs["resized"])
    herd_pixels = torch.tensor(inputs["herd_pixel_values"], dtype=torch.float32).reshape(hf_pixels.shape)

    tokenizer = AutoTokenizer.from_pretrained(folder)
    h, w = inputs["resized"]
    text = inputs["prompt"].replace("[IMG]", replace_image_token(h, w, patch, merge))
    token_ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    text_token_ids = tokenizer(inputs["text_prompt"], add_special_tokens=False)["input_ids"]

    model, info = Mistral3ForConditionalGeneration.from_pretrained(
        folder, dtype=torch.float32, attn_implementation="eager", output_loading_info=True
    )
    problems = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    assert not problems, f"the released tensor names did not load cleanly: {problems}"
    assert not torch.equal(model.lm_head.weight, model.get_input_embeddings().weight), "lm_head was tied"
    model.eval()
    ids = torch.tensor([token_ids])

    def last_logits(**kwargs):
        with torch.no_grad():
            return rounded(model(**kwargs).logits[0, -1].float().tolist())

    values = {
        "token_ids": token_ids,
        "text_token_ids": text_token_ids,
        "logits_hf_pixels": last_logits(input_ids=ids, pixel_values=hf_pixels, image_sizes=sizes),
        "logits_herd_pixels": last_logits(input_ids=ids, pixel_values=herd_pixels, image_sizes=sizes),
        "logits_text_only": last_logits(input_ids=torch.tensor([text_token_ids])),
        "hf_pixel_values": rounded(hf_pixels.flatten().tolist(), 7),
    }
    print("max |herd - hf| pixel value:", (herd_pixels - hf_pixels).abs().max().item())
    return values


def stimulus_values(folder, path):
    image = Image.open(path).convert("RGB")
    width, height = image.size
    pixels = process(folder, image, 2)["pixel_values"][0].numpy().astype(np.float32)
    _, rows_h, cols_w = pixels.shape
    resized = image.resize((cols_w, rows_h), resample=Image.BICUBIC)
    return {
        "size": [width, height],
        "resized": [rows_h, cols_w],
        "resized_rgb_fnv1a64": fnv1a64(resized.tobytes()),
        "rows": {
            "0/0": rounded(pixels[0, 0], 7),
            f"1/{rows_h // 2}": rounded(pixels[1, rows_h // 2], 7),
            f"2/{rows_h - 1}": rounded(pixels[2, rows_h - 1], 7),
        },
        "row_sums": [[float(s) for s in pixels[c].astype(np.float64).sum(axis=1)] for c in range(3)],
    }


def main(root):
    inputs = json.loads((root / "mistral3_inputs.json").read_text())
    out = {
        "seed": inputs["seed"],
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "resized": inputs["resized"],
        "mistral3": model_values(root / "mistral3", inputs),
    }
    folder = root / "mistral3_processor"
    out["stimuli"] = {task: stimulus_values(folder, root / "stimuli" / f"{task}.png") for task in inputs["stimuli"]}
    (HERE / "tiny_mistral3.json").write_text(json.dumps(out) + "\n")
    print("wrote", HERE / "tiny_mistral3.json")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(pathlib.Path(sys.argv[1]))
