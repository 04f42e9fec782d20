"""Golden values from llama.cpp (llama-cpp-python) on a GGUF model, for herd-infer's tests.

    python3 -m venv .venv && .venv/bin/pip install -r requirements.txt
    .venv/bin/python generate_llamacpp.py PATH/TO/SmolLM2-135M-Instruct.Q4_1.gguf
    .venv/bin/python generate_llamacpp.py PATH/TO/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf llamacpp-qwen2.5-coder-0.5b.json

(`cargo xtask fetch-model ALIAS` puts the GGUF at ~/.cache/herd/models/ALIAS/.) Writes llamacpp.json (or the
name given second) beside this script: token ids of a string corpus, and for each prompt of prompts.json the next-token
distribution after the model's chat template (answer probabilities summed over every token whose text,
stripped of leading whitespace, is the answer; the top 10 tokens).
"""
import json
import math
import pathlib
import sys

import jinja2.sandbox
import llama_cpp

# llama.cpp's "extra buffer types" (AMX tiles on CPUs that report AMX) crash in VMs that do not grant
# AMX state (seen on this project's machines); plain CPU buffers give the same results.
_default_model_params = llama_cpp.llama_model_default_params


def _model_params_without_extra_buffers():
    params = _default_model_params()
    params.use_extra_bufts = False
    return params


llama_cpp.llama_model_default_params = _model_params_without_extra_buffers
llama_cpp.llama.llama_cpp.llama_model_default_params = _model_params_without_extra_buffers

HERE = pathlib.Path(__file__).parent
CORPUS = [
    "A", "B", " A", "A B", "Answer: B", "12345", "3.14159 and 2,718", "1000000 points", "agent_07",
    "  leading spaces", "trailing spaces   ", "tabs\tand\nnewlines\n\n", "ÄÖÜ äöü ß", "naïve café",
    "日本語のテキスト", "emoji 🙂👍", "<|im_start|>user\nhi<|im_end|>", "<|endoftext|>", "don't we'll it's",
    "{\"agent_02\": 5, \"agent_03\": 10}", "REFERENCE LINE: a vertical line 300 pixels long",
    "(255, 128, 0)", "x" * 40, "", "The answer is **B**.",
]


def render(template, messages, bos_token, eos_token):
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(messages=messages, add_generation_prompt=True,
                                            bos_token=bos_token, eos_token=eos_token)


def main(gguf, out_name):
    llm = llama_cpp.Llama(model_path=gguf, n_ctx=2048, n_threads=2, logits_all=True, verbose=False)
    template = llm.metadata["tokenizer.chat_template"]
    n_vocab = llm.n_vocab()
    texts = [llm.detokenize([i], special=True).decode("utf-8", errors="replace") for i in range(n_vocab)]
    # The template's bos_token and eos_token, as transformers passes them: the tokens the GGUF names.
    bos_token, eos_token = (texts[i] if 0 <= i < n_vocab else "" for i in (llm.token_bos(), llm.token_eos()))
    tokens = {s: llm.tokenize(s.encode(), add_bos=False, special=True) for s in CORPUS}
    prompts = json.loads((HERE / "prompts.json").read_text())["prompts"]
    scores = []
    for p in prompts:
        text = render(template, [{"role": "user", "content": p["user"]}], bos_token, eos_token)
        ids = llm.tokenize(text.encode(), add_bos=False, special=True)
        llm.reset()
        llm.eval(ids)
        logits = [float(x) for x in llm.scores[len(ids) - 1]]
        top = max(logits)
        z = sum(math.exp(l - top) for l in logits)
        logp = [l - top - math.log(z) for l in logits]
        answers = {}
        for a in ["A", "B"]:
            match = [i for i, t in enumerate(texts) if t.lstrip() == a]
            answers[a] = {"p": sum(math.exp(logp[i]) for i in match), "token_ids": match}
        order = sorted(range(n_vocab), key=lambda i: -logits[i])[:10]
        scores.append({"id": p["id"], "rendered": text, "token_ids": ids, "answers": answers,
                       "top": [{"id": i, "logprob": logp[i], "logit": logits[i]} for i in order]})
    out = {"llama_cpp_python": llama_cpp.__version__, "n_vocab": n_vocab,
           "tokenize": [{"text": s, "ids": ids} for s, ids in tokens.items()], "scores": scores}
    (HERE / out_name).write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "llamacpp.json")
