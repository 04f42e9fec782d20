"""Golden values from HF transformers on herd's tiny Qwen2-VL and Qwen2.5-VL checkpoints, for tests/hf_golden.rs.

    cargo run -p herd-vision --example write_tiny_vl -- /tmp/tiny-vl
    python3 -m venv /tmp/herd-vl-golden
    /tmp/herd-vl-golden/bin/pip install -r crates/herd-infer/tests/golden/requirements-transformers.txt
    /tmp/herd-vl-golden/bin/python crates/herd-vision/tests/golden/tiny_qwen2_vl.py /tmp/tiny-vl

CPU, float32, eager attention, the PIL image processor (`Qwen2VLImageProcessorPil`, which the released
checkpoints' `Qwen2VLImageProcessor` was before transformers 5 moved it to torchvision). Writes
tiny_qwen2_vl.json beside this script:
- per family (qwen2_vl, qwen2_5_vl), loaded from the released tensor names (`visual.*`, `model.*`; loading
  must report no missing or unexpected weight): the last-position logits for the prompt of inputs.json with
  the HF processor's pixel values of image.png, with herd's pixel values (inputs.json), and without the image;
- the HF processor's pixel values of image.png (the tiny processor);
- per stimulus (stimuli/{lines,color,dots}.png) through the released Qwen2-VL processor settings
  (qwen2_vl_processor/): the size, smart_resize's size, the grid, an FNV-1a fingerprint of PIL's bicubic
  resize (RGB bytes), three patch rows of pixel values and every column's sum over all rows (float64).
`tiny_qwen2_vl_matches_transformers`, `tiny_qwen2_5_vl_matches_transformers` and
`stimuli_pixel_values_match_the_hf_processor` in hf_golden.rs compare against the committed JSON.
"""
import json
import pathlib
import sys

import numpy as np
import torch
import transformers
from PIL import Image
from transformers import (
    Qwen2_5_VLForConditionalGeneration,
    Qwen2VLForConditionalGeneration,
    Qwen2VLImageProcessorPil,
)

HERE = pathlib.Path(__file__).parent
MODELS = {"qwen2_vl": Qwen2VLForConditionalGeneration, "qwen2_5_vl": Qwen2_5_VLForConditionalGeneration}


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def rounded(values, digits=6):
    return [round(float(x), digits) for x in values]


def family_logits(folder, inputs, herd_pixels):
    processor = Qwen2VLImageProcessorPil.from_pretrained(folder)
    processed = processor(images=[Image.open(folder.parent / "image.png").convert("RGB")], return_tensors="pt")
    hf_pixels = processed["pixel_values"].float()
    grid = processed["image_grid_thw"]
    assert grid.tolist() == [inputs["grid_thw"]], (grid.tolist(), inputs["grid_thw"])
    assert herd_pixels.shape == hf_pixels.shape, (herd_pixels.shape, hf_pixels.shape)

    cls = MODELS[folder.name]
    model, info = cls.from_pretrained(
        folder, dtype=torch.float32, attn_implementation="eager", output_loading_info=True
    )
    problems = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    assert not problems, f"{folder.name}: the released tensor names did not load cleanly: {problems}"
    model.eval()
    ids = torch.tensor([inputs["token_ids"]])
    # transformers >= 5 wants the processor's token types (1 = image placeholder) to place M-RoPE positions.
    mm_types = (ids == model.config.image_token_id).long()

    def last_logits(**kwargs):
        with torch.no_grad():
            return rounded(model(**kwargs).logits[0, -1].float().tolist())

    values = {
        "logits_hf_pixels": last_logits(input_ids=ids, pixel_values=hf_pixels, image_grid_thw=grid, mm_token_type_ids=mm_types),
        "logits_herd_pixels": last_logits(input_ids=ids, pixel_values=herd_pixels, image_grid_thw=grid, mm_token_type_ids=mm_types),
        "logits_text_only": last_logits(input_ids=torch.tensor([inputs["text_token_ids"]])),
    }
    print(folder.name, "max |herd - hf| pixel value:", (herd_pixels - hf_pixels).abs().max().item())
    return values, hf_pixels


def stimulus_values(processor, path):
    image = Image.open(path).convert("RGB")
    width, height = image.size
    processed = processor(images=[image], return_tensors="np")
    pixels = processed["pixel_values"].astype(np.float32)
    grid = processed["image_grid_thw"][0].tolist()
    rows_h, cols_w = grid[1] * processor.patch_size, grid[2] * processor.patch_size
    resized = image.resize((cols_w, rows_h), resample=Image.BICUBIC)
    n = pixels.shape[0]
    rows = sorted({0, n // 2, n - 1})
    return {
        "size": [width, height],
        "resized": [rows_h, cols_w],
        "grid_thw": grid,
        "resized_rgb_fnv1a64": fnv1a64(resized.tobytes()),
        "rows": {str(r): rounded(pixels[r], 7) for r in rows},
        "column_sums": [float(s) for s in pixels.astype(np.float64).sum(axis=0)],
    }


def main(root):
    inputs = json.loads((root / "inputs.json").read_text())
    herd_pixels = torch.tensor(inputs["herd_pixel_values"], dtype=torch.float32)
    out = {
        "seed": inputs["seed"],
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "token_ids": inputs["token_ids"],
        "text_token_ids": inputs["text_token_ids"],
        "grid_thw": inputs["grid_thw"],
        "families": {},
    }
    hf_pixels = None
    for name in MODELS:
        values, pixels = family_logits(root / name, inputs, herd_pixels)
        out["families"][name] = values
        assert hf_pixels is None or torch.equal(hf_pixels, pixels), "the tiny processors differ"
        hf_pixels = pixels
    out["hf_pixel_values"] = [rounded(row, 7) for row in hf_pixels.tolist()]
    processor = Qwen2VLImageProcessorPil.from_pretrained(root / "qwen2_vl_processor")
    out["stimuli"] = {task: stimulus_values(processor, root / "stimuli" / f"{task}.png") for task in inputs["stimuli"]}
    (HERE / "tiny_qwen2_vl.json").write_text(json.dumps(out) + "\n")
    print("wrote", HERE / "tiny_qwen2_vl.json")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(pathlib.Path(sys.argv[1]))
