"""Golden values from HF transformers on herd's tiny Gemma 3 checkpoint, for tests/hf_golden.rs.

    cargo run -p herd-vision --example write_tiny_vl -- /tmp/tiny-vl
    python3 -m venv /tmp/herd-vl-golden
    /tmp/herd-vl-golden/bin/pip install -r crates/herd-infer/tests/golden/requirements-transformers.txt
    /tmp/herd-vl-golden/bin/python crates/herd-vision/tests/golden/tiny_gemma3.py /tmp/tiny-vl

CPU, float32, eager attention, the PIL image processor (`Gemma3ImageProcessorPil`; transformers 5 also has
a torchvision one, which resamples differently), `Gemma3Processor` for the text. Writes tiny_gemma3.json
beside this script:
- the checkpoint loaded from the released tensor names (`language_model.model.*`, `vision_tower.*`,
  `multi_modal_projector.*`, `language_model.lm_head`): loading must report no missing or unexpected weight;
- the chat template rendered by transformers for one user turn (an image, the question), which must be
  gemma3_inputs.json's prompt;
- the processor's input ids and token types for that prompt and image.png (`<start_of_image>` expanded
  in the text, then tokenized), which must be herd's, and its pixel values ([3, 32, 32] flattened);
- the last-position logits with the HF processor's pixel values, with herd's, without the image, and
  with the image but no token types (so every token causal: the bidirectional image block switched off,
  which herd's logits must differ from);
- per stimulus (stimuli/{lines,color,dots}.png) through the released processor settings
  (gemma3_processor/: 896×896, bilinear): the size, an FNV-1a fingerprint of PIL's bilinear resize (RGB
  bytes), three rows of pixel values and each channel's sum (float64).
`tiny_gemma3_matches_transformers` and `gemma3_stimuli_pixel_values_match_the_hf_processor` in
hf_golden.rs compare against the committed JSON.
"""
import json
import pathlib
import sys

import numpy as np
import torch
import transformers
from PIL import Image
from transformers import AutoTokenizer, Gemma3ForConditionalGeneration, Gemma3ImageProcessorPil, Gemma3Processor

HERE = pathlib.Path(__file__).parent


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def rounded(values, digits=6):
    return [round(float(x), digits) for x in values]


def stimulus_values(processor, path):
    image = Image.open(path).convert("RGB")
    width, height = image.size
    pixels = processor(images=[image], return_tensors="np")["pixel_values"][0].astype(np.float32)
    assert pixels.shape == (3, 896, 896), pixels.shape
    resized = image.resize((896, 896), resample=Image.BILINEAR)
    rows = {"0/0": pixels[0, 0], "1/448": pixels[1, 448], "2/895": pixels[2, 895]}
    return {
        "size": [width, height],
        "resized_rgb_fnv1a64": fnv1a64(resized.tobytes()),
        "rows": {k: rounded(v, 7) for k, v in rows.items()},
        "channel_sums": [float(s) for s in pixels.astype(np.float64).sum(axis=(1, 2))],
    }


def main(root):
    inputs = json.loads((root / "gemma3_inputs.json").read_text())
    folder = root / "gemma3"
    model, info = Gemma3ForConditionalGeneration.from_pretrained(
        folder, dtype=torch.float32, attn_implementation="eager", output_loading_info=True
    )
    problems = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    assert not problems, f"the released tensor names did not load cleanly: {problems}"
    model.eval()

    tokenizer = AutoTokenizer.from_pretrained(folder)
    image_processor = Gemma3ImageProcessorPil.from_pretrained(folder)
    chat_template = json.loads((folder / "chat_template.json").read_text())["chat_template"]
    processor = Gemma3Processor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        chat_template=chat_template,
        image_seq_length=model.config.mm_tokens_per_image,
    )
    messages = [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "which line matches the reference ?"}]}
    ]
    rendered = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert rendered == inputs["prompt"], (rendered, inputs["prompt"])

    image = Image.open(root / "image.png").convert("RGB")
    # The rendered text already holds <bos>: no special tokens added (as apply_chat_template tokenizes).
    processed = processor(text=[rendered], images=[image], add_special_tokens=False, return_tensors="pt")
    ids = processed["input_ids"]
    assert ids[0].tolist() == inputs["token_ids"], (ids[0].tolist(), inputs["token_ids"])
    token_types = processed["token_type_ids"]
    hf_pixels = processed["pixel_values"].float()
    herd_pixels = torch.tensor(inputs["herd_pixel_values"], dtype=torch.float32).reshape(hf_pixels.shape)
    print("max |herd - hf| pixel value:", (herd_pixels - hf_pixels).abs().max().item())
    text_ids = processor.tokenizer(inputs["text_prompt"], add_special_tokens=False, return_tensors="pt")["input_ids"]
    assert text_ids[0].tolist() == inputs["text_token_ids"]

    def last_logits(**kwargs):
        with torch.no_grad():
            return rounded(model(**kwargs).logits[0, -1].float().tolist())

    out = {
        "seed": inputs["seed"],
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "prompt": rendered,
        "token_ids": ids[0].tolist(),
        "token_type_ids": token_types[0].tolist(),
        "text_token_ids": inputs["text_token_ids"],
        "hf_pixel_values": rounded(hf_pixels.flatten().tolist(), 7),
        "logits_hf_pixels": last_logits(input_ids=ids, pixel_values=hf_pixels, token_type_ids=token_types),
        "logits_herd_pixels": last_logits(input_ids=ids, pixel_values=herd_pixels, token_type_ids=token_types),
        "logits_text_only": last_logits(input_ids=text_ids),
        "logits_all_causal": last_logits(input_ids=ids, pixel_values=hf_pixels),
    }
    released = Gemma3ImageProcessorPil.from_pretrained(root / "gemma3_processor")
    out["stimuli"] = {task: stimulus_values(released, root / "stimuli" / f"{task}.png") for task in inputs["stimuli"]}
    (HERE / "tiny_gemma3.json").write_text(json.dumps(out) + "\n")
    print("wrote", HERE / "tiny_gemma3.json")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(pathlib.Path(sys.argv[1]))
