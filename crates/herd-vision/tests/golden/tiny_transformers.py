"""Golden values from HF transformers on herd's tiny Qwen3-VL checkpoint, for tests/hf_golden.rs.

    cargo run -p herd-vision --example write_tiny_vl -- /tmp/tiny-vl
    python3 -m venv .venv && .venv/bin/pip install -r crates/herd-infer/tests/golden/requirements-transformers.txt
    .venv/bin/python crates/herd-vision/tests/golden/tiny_transformers.py /tmp/tiny-vl

Committed values: transformers 5.24.0 (>= 4.57 has Qwen3-VL), CPU, float32. Writes tiny_transformers.json beside
this script: an FNV-1a fingerprint of the checkpoint's model.safetensors, the slow Qwen2VLImageProcessor's pixel
values of image.png, and Qwen3VLForConditionalGeneration's last-position logits for the prompt of
inputs.json with those pixel values, with herd's pixel values (inputs.json), and without the image.
`tiny_qwen3_vl_matches_transformers` in hf_golden.rs compares against the committed JSON.
"""
import json
import pathlib
import sys

import torch
import transformers
from PIL import Image
from transformers import Qwen2VLImageProcessor, Qwen3VLForConditionalGeneration

HERE = pathlib.Path(__file__).parent


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def rounded(values):
    return [round(x, 6) for x in values]


def main(root):
    inputs = json.loads((root / "inputs.json").read_text())
    folder = root / "qwen3_vl"
    processor = Qwen2VLImageProcessor.from_pretrained(folder)
    processed = processor(images=[Image.open(root / "image.png").convert("RGB")], return_tensors="pt")
    hf_pixels = processed["pixel_values"].float()
    grid = processed["image_grid_thw"]
    assert grid.tolist() == [inputs["grid_thw"]], (grid.tolist(), inputs["grid_thw"])
    herd_pixels = torch.tensor(inputs["herd_pixel_values"], dtype=torch.float32)
    assert herd_pixels.shape == hf_pixels.shape, (herd_pixels.shape, hf_pixels.shape)

    model = Qwen3VLForConditionalGeneration.from_pretrained(folder, torch_dtype=torch.float32, attn_implementation="eager")
    model.eval()
    ids = torch.tensor([inputs["token_ids"]])
    # transformers >= 5 wants the processor's token types (1 = image placeholder) to place M-RoPE positions.
    mm_types = (ids == model.config.image_token_id).long()

    def last_logits(**kwargs):
        with torch.no_grad():
            return rounded(model(**kwargs).logits[0, -1].float().tolist())

    out = {
        "seed": inputs["seed"],
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "model_safetensors_fnv1a64": fnv1a64((folder / "model.safetensors").read_bytes()),
        "token_ids": inputs["token_ids"],
        "text_token_ids": inputs["text_token_ids"],
        "grid_thw": inputs["grid_thw"],
        "hf_pixel_values": [rounded(row) for row in hf_pixels.tolist()],
        "logits_hf_pixels": last_logits(input_ids=ids, pixel_values=hf_pixels, image_grid_thw=grid, mm_token_type_ids=mm_types),
        "logits_herd_pixels": last_logits(input_ids=ids, pixel_values=herd_pixels, image_grid_thw=grid, mm_token_type_ids=mm_types),
        "logits_text_only": last_logits(input_ids=torch.tensor([inputs["text_token_ids"]])),
    }
    print("max |herd - hf| pixel value:", (herd_pixels - hf_pixels).abs().max().item())
    (HERE / "tiny_transformers.json").write_text(json.dumps(out) + "\n")
    print("wrote", HERE / "tiny_transformers.json")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(pathlib.Path(sys.argv[1]))
