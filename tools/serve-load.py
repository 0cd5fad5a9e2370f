#!/usr/bin/env python3
"""serve-load.py — tools/serve-load.mjs for machines without node (the GPU machine has
python3 but no node): the same load, the same measurements, the same table and JSON.

N concurrent clients, each sending streaming requests back to back, per concurrency level:
requests/s, output tokens/s (from the server's usage), TTFT, inter-token latency and
end-to-end latency. Standard library only (http.client + threads).

usage: python3 tools/serve-load.py --url http://127.0.0.1:8000 [--concurrency 1,8,32]
       [--requests N] [--max-tokens N] [--prompt TEXT | --prompt-words N]
       [--shared-prefix N] [--chat] [--no-stream] [--model NAME] [--api-key KEY] [--json FILE]
--shared-prefix N: a system prompt of about N tokens (N words) shared by every request, then a
per-request number and the prompt (the prefix-cache hit rate comes from the usage's
prompt_tokens_details.cached_tokens).
"""
import argparse
import http.client
import json
import sys
import threading
import time
import urllib.parse


WORDS = ("the of and to in is you that it he was for on are as with his they at be this "
         "have from or one had by word but not what all were we when your can said there "
         "use an each which she do how their if will up other about out many then them").split()
REQUEST_NO = [0]
REQUEST_LOCK = threading.Lock()


def shared_text(n):
    """The shared system prompt: n common words (most are one token each with their space)."""
    return " ".join(WORDS[i % len(WORDS)] for i in range(n))


def cached_of(u):
    """usage.prompt_tokens_details.cached_tokens (OpenAI's field), 0 when absent."""
    return (u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0


def one(o, max_tokens=None):
    """One request → dict(ok, e2e, ttft, itls, out, prompt, cached, error)."""
    max_tokens = max_tokens or o.max_tokens
    body = {"max_tokens": max_tokens, "ignore_eos": True, "temperature": 0, "stream": o.stream}
    if o.stream:
        body["stream_options"] = {"include_usage": True}
    if o.model:
        body["model"] = o.model
    messages, prompt = [{"role": "user", "content": o.prompt}], o.prompt
    if o.shared_prefix:
        with REQUEST_LOCK:
            k = REQUEST_NO[0]
            REQUEST_NO[0] += 1
        sys_text = shared_text(o.shared_prefix)
        messages = [{"role": "system", "content": sys_text},
                    {"role": "user", "content": "Request %d: %s" % (k, o.prompt)}]
        prompt = "%s\n\nRequest %d: %s" % (sys_text, k, o.prompt)
    if o.chat:
        body["messages"] = messages
    else:
        body["prompt"] = prompt
    headers = {"Content-Type": "application/json"}
    if o.api_key:
        headers["Authorization"] = "Bearer " + o.api_key
    u = urllib.parse.urlparse(o.url)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=600)
    t0 = time.perf_counter()
    try:
        conn.request("POST", "/v1/chat/completions" if o.chat else "/v1/completions",
                     json.dumps(body), headers)
        res = conn.getresponse()
        if res.status != 200:
            return {"ok": False, "error": "HTTP %d: %s" % (res.status, res.read()[:200])}
        if not o.stream:
            j = json.loads(res.read())
            return {"ok": True, "e2e": time.perf_counter() - t0, "ttft": None, "itls": [],
                    "out": j["usage"]["completion_tokens"], "prompt": j["usage"]["prompt_tokens"],
                    "cached": cached_of(j["usage"])}
        ttft, last, usage, itls, buf = None, None, None, [], b""
        while True:
            line = res.readline()
            if not line:
                break
            line = line.rstrip(b"\r\n")
            if not line.startswith(b"data: "):
                continue
            d = line[6:]
            if d == b"[DONE]":
                break
            j = json.loads(d)
            if j.get("error"):
                return {"ok": False, "error": j["error"]["message"]}
            if j.get("usage"):
                usage = j["usage"]
            c = j["choices"][0] if j.get("choices") else None
            text = (c.get("delta", {}).get("content") if o.chat else c.get("text")) if c else None
            if text:
                t = time.perf_counter()
                if ttft is None:
                    ttft = t - t0
                else:
                    itls.append(t - last)
                last = t
        if not usage:
            return {"ok": False, "error": "no usage chunk in the stream"}
        return {"ok": True, "e2e": time.perf_counter() - t0, "ttft": ttft, "itls": itls,
                "out": usage["completion_tokens"], "prompt": usage["prompt_tokens"],
                "cached": cached_of(usage)}
    except (OSError, http.client.HTTPException, ValueError) as e:
        return {"ok": False, "error": str(e)}
    finally:
        conn.close()


def pct(xs, p):
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(p / 100 * len(s)))]


def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def level(o, conc):
    total = o.requests or max(8, 4 * conc)
    lock = threading.Lock()
    state = {"next": 0}
    results = []

    def worker():
        while True:
            with lock:
                if state["next"] >= total:
                    return
                state["next"] += 1
            r = one(o)
            with lock:
                results.append(r)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(conc)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ok = [r for r in results if r["ok"]]
    errors = [r["error"] for r in results if not r["ok"]]
    out = sum(r["out"] for r in ok)
    ttfts = [r["ttft"] for r in ok if r["ttft"] is not None]
    itls = [x for r in ok for x in r["itls"]]
    e2es = [r["e2e"] for r in ok]
    prompt_sum = sum(r["prompt"] for r in ok)
    cached_sum = sum(r["cached"] for r in ok)
    return {
        "concurrency": conc, "requests": len(results), "ok": len(ok), "errors": len(errors),
        "first_error": errors[0] if errors else None, "wall_s": wall,
        "requests_per_s": len(ok) / wall, "output_tokens": out, "output_tokens_per_s": out / wall,
        "prompt_tokens": ok[0]["prompt"] if ok else 0, "max_tokens": o.max_tokens,
        "cached_tokens": cached_sum,
        "prefix_hit_rate": cached_sum / prompt_sum if prompt_sum else None,
        "usage_mismatches": sum(1 for r in ok if r["out"] != o.max_tokens),
        "ttft_ms": {"mean": 1e3 * mean(ttfts), "p50": 1e3 * pct(ttfts, 50), "p99": 1e3 * pct(ttfts, 99)},
        "itl_ms": {"mean": 1e3 * mean(itls), "p50": 1e3 * pct(itls, 50), "p99": 1e3 * pct(itls, 99)},
        "e2e_s": {"mean": mean(e2es), "p50": pct(e2es, 50), "p99": pct(e2es, 99)},
    }


def main():
    ap = argparse.ArgumentParser(description="load generator for llmrt serve")
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--concurrency", default="1,8,32")
    ap.add_argument("--requests", type=int, default=0)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--prompt", default="The quick brown fox jumps over the lazy dog. Tell me a story about it.")
    ap.add_argument("--prompt-words", type=int, default=0)
    ap.add_argument("--shared-prefix", type=int, default=0)
    ap.add_argument("--chat", action="store_true")
    ap.add_argument("--no-stream", dest="stream", action="store_false")
    ap.add_argument("--model")
    ap.add_argument("--api-key")
    ap.add_argument("--json")
    o = ap.parse_args()
    o.url = o.url.rstrip("/")
    if o.prompt_words:
        o.prompt = " ".join(["word"] * o.prompt_words)
    try:
        levels = [int(x) for x in o.concurrency.split(",")]
        assert all(x >= 1 for x in levels) and o.max_tokens >= 1
    except (ValueError, AssertionError):
        ap.error("--concurrency wants positive integers like 1,8,32; --max-tokens >= 1")
    warm = one(o, 2)
    if not warm["ok"]:
        print("serve-load: the server at %s did not answer a warm-up request: %s" % (o.url, warm["error"]),
              file=sys.stderr)
        sys.exit(1)
    print("serve-load: %s %s, %s, prompt %d tokens%s, %d output tokens per request" %
          (o.url, "chat" if o.chat else "completions", "streaming" if o.stream else "whole",
           warm["prompt"],
           " (a %d-word prefix shared by all)" % o.shared_prefix if o.shared_prefix else "",
           o.max_tokens))
    print("conc  requests  req/s   out tok/s  TTFT p50/p99 ms   ITL p50/p99 ms   e2e p50 s  cached  errors")
    results = []
    for conc in levels:
        r = level(o, conc)
        results.append(r)
        hit = "-" if r["prefix_hit_rate"] is None else "%.1f%%" % (100 * r["prefix_hit_rate"])
        print("%4d  %8d  %6.2f  %9.1f  %15s  %15s  %9.2f  %6s  %d%s" % (
            conc, r["requests"], r["requests_per_s"], r["output_tokens_per_s"],
            "%.1f/%.1f" % (r["ttft_ms"]["p50"], r["ttft_ms"]["p99"]),
            "%.2f/%.2f" % (r["itl_ms"]["p50"], r["itl_ms"]["p99"]), r["e2e_s"]["p50"], hit,
            r["errors"], " (%s)" % r["first_error"] if r["first_error"] else ""))
        if r["usage_mismatches"]:
            print("      warning: %d responses reported completion_tokens != %d" %
                  (r["usage_mismatches"], o.max_tokens))
    if o.json:
        with open(o.json, "w") as f:
            json.dump({"url": o.url, "chat": o.chat, "stream": o.stream,
                       "shared_prefix_words": o.shared_prefix, "results": results}, f, indent=2)
    sys.exit(1 if any(r["errors"] for r in results) else 0)


if __name__ == "__main__":
    main()
