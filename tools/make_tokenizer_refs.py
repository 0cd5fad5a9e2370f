#!/usr/bin/env python3
"""make_tokenizer_refs.py — check llmrt's tokenizer references against Hugging Face itself,
write the cases only HF can answer, and time HF `tokenizers` for BENCHMARKS.md.

Run where `tokenizers` and `transformers` are installed (the GPU machine), with the Qwen3
tokenizer folder copied there (tools/fetch-qwen3-tokenizer.sh prints where it is cached):

  python3 tools/make_tokenizer_refs.py --tokenizer DIR --check
      Every case of tests/fixtures/tokenizer/qwen3_refs.json (made with the JS tokenizer and
      @huggingface/jinja) is re-derived with HF: encode ids and decodes with `tokenizers`,
      chat prompts with transformers' apply_chat_template. Exit 1 on any difference.

  python3 tools/make_tokenizer_refs.py --tokenizer DIR --write-hf
      Writes tests/fixtures/tokenizer/qwen3_hf_refs.json: texts where the JS tokenizer is
      known to differ from HF (its regex \\s matches U+FEFF and not U+0085; PCRE2's matches
      U+180E), encoded by HF. test_tokenizer_qwen3 checks them when the file exists.

  python3 tools/make_tokenizer_refs.py --tokenizer DIR --bench FILE [--seconds S]
      HF `tokenizers` encode throughput on FILE, printed like `llmrt tokenize --bench`.
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "tests", "fixtures", "tokenizer")

# Texts whose pre-tokenization depends on the regex dialect's idea of whitespace.
DIALECT_TEXTS = [
    ("nel_between_letters", "a\u0085b"),
    ("nel_space_letter", "a \u0085b"),
    ("nel_before_newline", "x\u0085 \n"),
    ("nel_runs", "x \u0085\u0085 y\u0085\u0085\u0085z"),
    ("nel_trailing", "end\u0085"),
    ("nel_digits", "1\u00852 \u00853"),
    ("nel_punct", "!\u0085? \u0085."),
    ("bom_start", "\ufeffhello"),
    ("bom_space", "a \ufeff b"),
    ("bom_newline", "a\ufeff\n b"),
    ("bom_runs", "\ufeff\ufeff x \ufeff\ufeff\n"),
    ("bom_letters", "ab\ufeffcd \ufeffef"),
    ("mvs_space_letter", "a \u180eb"),
    ("mvs_alone", "hi\u180e there"),
    ("mvs_newline", "a\u180e\n\u180e b"),
    ("mvs_runs", "x \u180e\u180e y\u180e\u180e"),
    ("mixed_dialect", "p\u0085q\ufeffr\u180es \u0085\ufeff\u180e\n\tt"),
    ("spaces_all_kinds", "a\u00a0b\u1680c\u2000d\u2001e\u2002f\u2003g\u2004h\u2005i\u2006j\u2007k"
                         "\u2008l\u2009m\u200an\u2028o\u2029p\u202fq\u205fr\u3000s"),
    ("spaces_all_kinds_runs", "a \u00a0\u2003 b\u3000\u3000c\n\u2028\u2029d"),
]


def load(tok_dir):
    from tokenizers import Tokenizer
    return Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json"))


def check(tok_dir, refs_path):
    tok = load(tok_dir)
    refs = json.load(open(refs_path, encoding="utf-8"))
    bad = 0
    for c in refs["encode"]:
        ids = tok.encode(c["text"], add_special_tokens=False).ids
        if ids != c["ids"]:
            bad += 1
            print(f"encode {c['name']}: HF {ids[:12]}... differs from the reference {c['ids'][:12]}...")
        dec = tok.decode(c["ids"], skip_special_tokens=False)
        if dec != c["decoded"]:
            bad += 1
            print(f"decode {c['name']}: HF {dec[:40]!r} differs from {c['decoded'][:40]!r}")
    for c in refs["decode"]:
        dec = tok.decode(c["ids"], skip_special_tokens=c["skip_special"])
        if dec != c["text"]:
            bad += 1
            print(f"decode {c['name']}: HF {dec!r} differs from {c['text']!r}")
    from transformers import AutoTokenizer
    hf = AutoTokenizer.from_pretrained(tok_dir)
    for c in refs["chat"]:
        kwargs = {"tokenize": False, "add_generation_prompt": c["add_generation_prompt"]}
        if "enable_thinking" in c:
            kwargs["enable_thinking"] = c["enable_thinking"]
        if "tools" in c:
            kwargs["tools"] = c["tools"]
        text = hf.apply_chat_template(c["messages"], **kwargs)
        if text != c["text"]:
            bad += 1
            k = next((i for i, (a, b) in enumerate(zip(text, c["text"])) if a != b), min(len(text), len(c["text"])))
            print(f"chat {c['name']}: transformers differs at {k}: {text[k:k+40]!r} vs {c['text'][k:k+40]!r}")
        ids = tok.encode(text, add_special_tokens=False).ids
        if ids != c["ids"]:
            bad += 1
            print(f"chat {c['name']}: prompt ids differ")
    n = len(refs["encode"]) + len(refs["decode"]) + len(refs["chat"])
    print(f"{n} reference cases checked against Hugging Face: {bad} difference(s)")
    return 1 if bad else 0


def write_hf(tok_dir, out):
    tok = load(tok_dir)
    cases = []
    for name, text in DIALECT_TEXTS:
        ids = tok.encode(text, add_special_tokens=False).ids
        cases.append({"name": name, "text": text, "ids": ids,
                      "decoded": tok.decode(ids, skip_special_tokens=False)})
    import tokenizers
    doc = {"generator": f"tools/make_tokenizer_refs.py (tokenizers {tokenizers.__version__})",
           "encode": cases}
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=True)
        f.write("\n")
    print(f"wrote {out}: {len(cases)} cases")
    return 0


def bench(tok_dir, path, seconds):
    tok = load(tok_dir)
    text = open(path, encoding="utf-8").read()
    size = len(text.encode("utf-8"))
    t0 = time.perf_counter()
    n = len(tok.encode(text, add_special_tokens=False).ids)
    cold = time.perf_counter() - t0
    passes, t0, c0 = 0, time.perf_counter(), time.process_time()
    while True:
        tok.encode(text, add_special_tokens=False)
        passes += 1
        if time.perf_counter() - t0 >= seconds:
            break
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    import tokenizers
    print(f"HF tokenizers {tokenizers.__version__} encode bench: {path}: {size} bytes, {n} tokens "
          f"({size / n:.2f} bytes/token)")
    print(f"  first pass (cold cache): {size / cold / 1e6:8.2f} MB/s  {n / cold:10.0f} tokens/s")
    print(f"  repeated ({passes} passes, 1 call at a time): {size * passes / wall / 1e6:8.2f} MB/s  "
          f"{n * passes / wall:10.0f} tokens/s")
    print(f"  per CPU-second (all threads HF used): {size * passes / cpu / 1e6:8.2f} MB/s  "
          f"{n * passes / cpu:10.0f} tokens/s")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", required=True, help="folder with tokenizer.json and tokenizer_config.json")
    ap.add_argument("--check", action="store_true", help="re-derive qwen3_refs.json with HF")
    ap.add_argument("--refs", default=os.path.join(FIXTURES, "qwen3_refs.json"))
    ap.add_argument("--write-hf", action="store_true", help="write qwen3_hf_refs.json")
    ap.add_argument("--out", default=os.path.join(FIXTURES, "qwen3_hf_refs.json"))
    ap.add_argument("--bench", metavar="FILE", help="time HF encode on FILE")
    ap.add_argument("--seconds", type=float, default=3.0)
    a = ap.parse_args()
    rc = 0
    if a.check:
        rc |= check(a.tokenizer, a.refs)
    if a.write_hf:
        rc |= write_hf(a.tokenizer, a.out)
    if a.bench:
        rc |= bench(a.tokenizer, a.bench, a.seconds)
    if not (a.check or a.write_hf or a.bench):
        ap.error("give --check, --write-hf and/or --bench")
    return rc


if __name__ == "__main__":
    sys.exit(main())
