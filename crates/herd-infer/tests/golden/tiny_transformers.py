"""Golden logits from HF transformers on herd's tiny text checkpoints, for hf_families.rs.

    cargo run -p herd-infer --example write_tiny_checkpoints -- /tmp/tiny
    python3 -m venv .venv && .venv/bin/pip install -r crates/herd-infer/tests/golden/requirements-transformers.txt
    .venv/bin/python crates/herd-infer/tests/golden/tiny_transformers.py /tmp/tiny

Runs on CPU (float32). Writes tiny_transformers.json beside this script: for each family (llama, qwen2,
qwen3, phi3) the sha256 of its model.safetensors and, for each token sequence of inputs.json, the
logits at every position and at the last one. `tiny_models_match_transformers` in hf_families.rs
compares against the committed JSON (made with transformers 5.24.0, torch 2.15.0).
"""
import hashlib
import json
import pathlib
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM

HERE = pathlib.Path(__file__).parent


def main(root):
    inputs = json.loads((root / "inputs.json").read_text())
    out = {
        "seed": inputs["seed"],
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "families": {},
    }
    for family in inputs["families"]:
        folder = root / family
        model = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32, attn_implementation="eager")
        model.eval()
        assert model.config.model_type == family, (model.config.model_type, family)
        sequences = {}
        for name, tokens in inputs["sequences"].items():
            with torch.no_grad():
                logits = model(torch.tensor([tokens])).logits[0].float()  # [len, vocab]
            rows = [[round(x, 6) for x in row] for row in logits.tolist()]
            sequences[name] = {"tokens": tokens, "logits": rows, "last_logits": rows[-1]}
        sha = hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
        out["families"][family] = {"model_safetensors_sha256": sha, "sequences": sequences}
        print(family, "last logits of full[:4]:", sequences["full"]["last_logits"][:4])
    (HERE / "tiny_transformers.json").write_text(json.dumps(out) + "\n")
    print("wrote", HERE / "tiny_transformers.json")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(pathlib.Path(sys.argv[1]))
