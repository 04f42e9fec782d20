"""llama.cpp's side of `cargo xtask bench infer` (llama-cpp-python), same GGUF, prompts and threads.

Scoring: each prompt is evaluated after the longest token prefix it shares with the previous one (what
llama-cpp-python itself does between calls), reading the last position's logits. Generation: the 20
deciders one by one (create_completion) and, where the installed llama.cpp allows, as parallel
sequences in one batch (llama.cpp's slots, through its low-level batch API). Prints one JSON line.
"""
import ctypes
import json
import math
import sys
import time

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
import numpy as np


def render(template, messages):
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    msgs = [{"role": m["role"], "content": "\n".join(p["text"] for p in m["content"])} for m in messages]
    return env.from_string(template).render(messages=msgs, add_generation_prompt=True)


def read(path):
    return [json.loads(l) for l in open(path) if l.strip()]


def main(gguf, scoring, society, max_tokens, threads):
    max_tokens, threads = int(max_tokens), int(threads)
    t0 = time.perf_counter()
    llm = llama_cpp.Llama(model_path=gguf, n_ctx=4096, n_batch=512, n_threads=threads, n_threads_batch=threads,
                          logits_all=False, verbose=False)
    load_s = time.perf_counter() - t0
    template = llm.metadata["tokenizer.chat_template"]
    n_vocab = llm.n_vocab()
    a_id = llm.tokenize(b"A", add_bos=False, special=True)[0]

    prompts = [llm.tokenize(render(template, p["messages"]).encode(), add_bos=False, special=True) for p in read(scoring)]
    start = time.perf_counter()
    previous, p_a = [], []
    for tokens in prompts:
        common = 0
        for x, y in zip(previous, tokens[:-1]):
            if x != y:
                break
            common += 1
        llm.n_tokens = common
        llm.eval(tokens[common:])
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(n_vocab,)).astype(np.float64)
        z = np.exp(logits - logits.max())
        p_a.append(float(z[a_id] / z.sum()))
        previous = tokens
    scoring_s = time.perf_counter() - start

    deciders = [render(template, d["messages"]) for d in read(society)]
    llm.reset()
    start = time.perf_counter()
    sequential_tokens = 0
    for i, text in enumerate(deciders):
        out = llm.create_completion(text, max_tokens=max_tokens, temperature=0.7, top_p=1.0, top_k=0, seed=i)
        sequential_tokens += out["usage"]["completion_tokens"]
    sequential_s = time.perf_counter() - start
    parallel = parallel_generation(llm, deciders, max_tokens, threads)
    print(json.dumps({"load_s": load_s,
                      "scoring": {"prompts": len(prompts), "seconds": scoring_s, "p_a": p_a},
                      "generation_sequential": {"completion_tokens": sequential_tokens, "seconds": sequential_s},
                      "generation_parallel": parallel}))


def parallel_generation(llm0, texts, max_tokens, threads):
    """All sequences decoded together, as llama.cpp's server slots do: each prompt is prefilled in chunks
    of at most n_batch tokens (its first token sampled from its own last chunk), then one llama_batch per
    step carries one token for every live sequence."""
    n = len(texts)
    toks = [llm0.tokenize(t.encode(), add_bos=False, special=True) for t in texts]
    n_batch = 512
    # Separate KV streams of equal size: every sequence gets its prompt plus max_tokens, rounded up.
    per_seq = -(-(max(len(t) for t in toks) + max_tokens) // 256) * 256
    # The Llama class ignores n_seq_max, so the context comes from the low-level API on the loaded model.
    params = llama_cpp.llama_context_default_params()
    params.n_ctx = per_seq * n
    params.n_batch = params.n_ubatch = n_batch
    params.n_seq_max = n
    params.n_threads = params.n_threads_batch = threads
    params.kv_unified = False
    ctx = llama_cpp.llama_init_from_model(llm0._model.model, params)
    if not ctx:
        return {"error": f"llama.cpp could not open a context for {n} parallel sequences"}
    n_vocab = llm0.n_vocab()
    eos = llm0.token_eos()
    rng = np.random.default_rng(0)
    batch = llama_cpp.llama_batch_init(max(n_batch, n), 0, 1)

    def decode(entries):
        batch.n_tokens = len(entries)
        for i, (tok, pos, seq, want) in enumerate(entries):
            batch.token[i] = tok
            batch.pos[i] = pos
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq
            batch.logits[i] = want
        if llama_cpp.llama_decode(ctx, batch) != 0:
            raise RuntimeError("llama_decode failed")

    def sample(index):
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, index), shape=(n_vocab,)).astype(np.float64)
        z = np.exp((logits - logits.max()) / 0.7)
        return int(rng.choice(n_vocab, p=z / z.sum()))

    start = time.perf_counter()
    generated, nxt = 0, []
    for s, t in enumerate(toks):
        for c in range(0, len(t), n_batch):
            chunk = t[c:c + n_batch]
            decode([(tok, c + p, s, c + p == len(t) - 1) for p, tok in enumerate(chunk)])
        tok = sample(len(t) - 1 - (len(t) - 1) // n_batch * n_batch)
        if tok != eos:
            nxt.append((s, tok))
            generated += 1
    prefill_s = time.perf_counter() - start
    lengths = [len(t) for t in toks]
    for _ in range(max_tokens - 1):
        if not nxt:
            break
        decode([(tok, lengths[s], s, True) for s, tok in nxt])
        for s, _ in nxt:
            lengths[s] += 1
        following = []
        for i, (s, _) in enumerate(nxt):
            tok = sample(i)
            if tok != eos:
                following.append((s, tok))
                generated += 1
        nxt = following
    seconds = time.perf_counter() - start
    llama_cpp.llama_batch_free(batch)
    llama_cpp.llama_free(ctx)
    return {"completion_tokens": generated, "seconds": seconds, "prefill_seconds": prefill_s}


if __name__ == "__main__":
    main(*sys.argv[1:])
