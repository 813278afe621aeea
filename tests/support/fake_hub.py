"""A fake Hugging Face Hub: a real HTTP server on 127.0.0.1 for the real huggingface_hub client.

It serves the shapes the notes describe (../shared/hf-hub-notes.md §5, §7, §8, §13):
- `GET /api/models/{id}[/revision/{rev}]` model info JSON (`?blobs=true` adds file sizes);
- `GET /api/models?search=` search results, most downloaded first;
- `HEAD|GET /{id}/resolve/{rev}/{file}`: config.json from real model configs, safetensors files
  whose headers are built from the config (8-byte little-endian length + JSON header), with
  HTTP Range support, and sharded repos with `model.safetensors.index.json`;
- gated repos (401/403 `X-Error-Code: GatedRepo`), missing repos (404 `RepoNotFound`), a
  private repo (401 without an error code, as the Hub answers anonymous callers), an invalid
  token (401 "Invalid credentials"), and injected faults: 429 with Retry-After, 5xx, delays.

Every request is counted per path (`requests_for()`, or `GET /_stats`), so tests and the
benchmark can assert how many times the Hub was really asked.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

CONFIGS = Path(__file__).resolve().parent.parent / "fixtures" / "hf-configs"

TORCH_DTYPES = {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}
DTYPE_BYTES = {"BF16": 2, "F16": 2, "F32": 4}


def load_config(repo_id: str) -> dict[str, Any]:
    return json.loads((CONFIGS / repo_id.replace("/", "__") / "config.json").read_text())


def llama_style_tensors(config: dict[str, Any]) -> list[tuple[str, list[int]]]:
    """Tensor names and shapes of a LLaMA-family checkpoint (Llama, Mistral, Qwen2)."""
    hidden = config["hidden_size"]
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads", heads)
    head_dim = config.get("head_dim", hidden // heads)
    inter = config["intermediate_size"]
    vocab = config["vocab_size"]
    qkv_bias = config.get("model_type") == "qwen2"  # Qwen2 has q/k/v biases, Llama/Mistral none
    tensors = [("model.embed_tokens.weight", [vocab, hidden])]
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}"
        tensors += [
            (f"{p}.input_layernorm.weight", [hidden]),
            (f"{p}.self_attn.q_proj.weight", [heads * head_dim, hidden]),
            (f"{p}.self_attn.k_proj.weight", [kv_heads * head_dim, hidden]),
            (f"{p}.self_attn.v_proj.weight", [kv_heads * head_dim, hidden]),
            (f"{p}.self_attn.o_proj.weight", [hidden, heads * head_dim]),
            (f"{p}.mlp.gate_proj.weight", [inter, hidden]),
            (f"{p}.mlp.up_proj.weight", [inter, hidden]),
            (f"{p}.mlp.down_proj.weight", [hidden, inter]),
            (f"{p}.post_attention_layernorm.weight", [hidden]),
        ]
        if qkv_bias:
            tensors += [
                (f"{p}.self_attn.q_proj.bias", [heads * head_dim]),
                (f"{p}.self_attn.k_proj.bias", [kv_heads * head_dim]),
                (f"{p}.self_attn.v_proj.bias", [kv_heads * head_dim]),
            ]
    tensors.append(("model.norm.weight", [hidden]))
    if not config.get("tie_word_embeddings", False):
        tensors.append(("lm_head.weight", [vocab, hidden]))
    return tensors


@dataclass
class SafetensorsFile:
    """A safetensors file of which only the header is real; the data section reads as zeros."""

    header: bytes  # 8-byte length + padded JSON
    size: int  # what the whole file would weigh

    @classmethod
    def build(cls, tensors: list[tuple[str, list[int]]], dtype: str) -> SafetensorsFile:
        entries: dict[str, Any] = {"__metadata__": {"format": "pt"}}
        offset = 0
        for name, shape in sorted(tensors):
            count = 1
            for dim in shape:
                count *= dim
            end = offset + count * DTYPE_BYTES[dtype]
            entries[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, end]}
            offset = end
        raw = json.dumps(entries, separators=(",", ":")).encode()
        raw += b" " * (-len(raw) % 8)
        header = struct.pack("<Q", len(raw)) + raw
        return cls(header=header, size=len(header) + offset)

    def read(self, start: int, end: int) -> bytes:
        """Bytes start..end inclusive (end already clipped to size - 1)."""
        chunk = self.header[start : end + 1]
        return chunk + b"\0" * (end + 1 - start - len(chunk))


@dataclass
class FakeModel:
    repo_id: str
    config: dict[str, Any] | None
    sha: str = ""
    aliases: tuple[str, ...] = ()
    gated: bool | str = False
    private: bool = False
    pipeline_tag: str = "text-generation"
    library_name: str = "transformers"
    license: str = "apache-2.0"
    downloads: int = 1000
    likes: int = 10
    # Counts the Hub's model info reports; None when the Hub has none (then the headers count).
    safetensors_parameters: dict[str, int] | None = None
    files: dict[str, bytes | SafetensorsFile] = field(default_factory=dict)
    last_modified: str = "2024-09-25T14:32:21.000Z"

    def __post_init__(self):
        if not self.sha:
            self.sha = hashlib.sha1(self.repo_id.encode(), usedforsecurity=False).hexdigest()
        if self.config is not None and "config.json" not in self.files:
            self.files["config.json"] = json.dumps(self.config, indent=2).encode()

    def file_size(self, name: str) -> int:
        body = self.files[name]
        return body.size if isinstance(body, SafetensorsFile) else len(body)

    def info(self, *, blobs: bool) -> dict[str, Any]:
        siblings = []
        for name in sorted(self.files):
            sibling: dict[str, Any] = {"rfilename": name}
            if blobs:
                size = self.file_size(name)
                blob = hashlib.sha1(
                    f"{self.sha}:{name}".encode(), usedforsecurity=False
                ).hexdigest()
                sibling.update({"blobId": blob, "size": size})
                if name.endswith((".safetensors", ".bin")):
                    digest = hashlib.sha256(f"{self.sha}:{name}".encode()).hexdigest()
                    sibling["lfs"] = {"sha256": digest, "size": size, "pointerSize": 134}
            siblings.append(sibling)
        namespace = self.repo_id.split("/")[0]
        config = self.config or {}
        body: dict[str, Any] = {
            "_id": hashlib.md5(self.repo_id.encode(), usedforsecurity=False).hexdigest()[:24],
            "id": self.repo_id,
            "modelId": self.repo_id,
            "author": namespace,
            "sha": self.sha,
            "lastModified": self.last_modified,
            "createdAt": "2022-03-02T23:29:04.000Z",
            "private": self.private,
            "gated": self.gated,
            "disabled": False,
            "pipeline_tag": self.pipeline_tag,
            "library_name": self.library_name,
            "tags": [
                self.library_name,
                "safetensors",
                config.get("model_type", ""),
                self.pipeline_tag,
                f"license:{self.license}",
                "region:us",
            ],
            "downloads": self.downloads,
            "likes": self.likes,
            "config": {
                "architectures": config.get("architectures"),
                "model_type": config.get("model_type"),
                "tokenizer_config": {},
            },
            "cardData": {"license": self.license},
            "transformersInfo": {
                "auto_model": "AutoModelForCausalLM",
                "pipeline_tag": self.pipeline_tag,
                "processor": "AutoTokenizer",
            },
            "siblings": siblings,
            "spaces": [],
            "usedStorage": sum(self.file_size(n) for n in self.files),
        }
        if self.safetensors_parameters is not None:
            body["safetensors"] = {
                "parameters": self.safetensors_parameters,
                "total": sum(self.safetensors_parameters.values()),
            }
        return body


@dataclass
class Fault:
    status: int
    times: int
    retry_after: int | None = None


def default_models() -> list[FakeModel]:
    gpt2 = load_config("openai-community/gpt2")
    qwen = load_config("Qwen/Qwen2.5-0.5B")
    mistral = load_config("mistralai/Mistral-7B-v0.1")
    opt = load_config("facebook/opt-1.3b")
    llama = load_config("meta-llama/Llama-3.2-1B")

    mistral_tensors = llama_style_tensors(mistral)
    half = len(mistral_tensors) // 2
    shards = {
        "model-00001-of-00002.safetensors": mistral_tensors[:half],
        "model-00002-of-00002.safetensors": mistral_tensors[half:],
    }
    mistral_files: dict[str, bytes | SafetensorsFile] = {
        name: SafetensorsFile.build(tensors, "BF16") for name, tensors in shards.items()
    }
    mistral_files["model.safetensors.index.json"] = json.dumps(
        {
            "metadata": {
                "total_size": sum(
                    f.size - len(f.header)
                    for f in mistral_files.values()  # type: ignore[union-attr]
                )
            },
            "weight_map": {t: name for name, tensors in shards.items() for t, _ in tensors},
        }
    ).encode()

    return [
        # Counts in the model info (the common case); the original checkpoint stores the causal
        # mask buffers, so the Hub reports 137,022,720 F32 elements for 124,439,808 parameters.
        FakeModel(
            "openai-community/gpt2",
            gpt2,
            aliases=("gpt2",),
            license="mit",
            sha="607a30d783dfa663caf39e06633721c8d4cfcd7e",
            downloads=14347531,
            likes=2865,
            safetensors_parameters={"F32": 137022720},
            files={"model.safetensors": SafetensorsFile(header=b"", size=548105171)},
        ),
        # No counts in the model info: the lookup must read the single file's header.
        FakeModel(
            "Qwen/Qwen2.5-0.5B",
            qwen,
            downloads=900000,
            files={"model.safetensors": SafetensorsFile.build(llama_style_tensors(qwen), "BF16")},
        ),
        # Sharded, no counts in the model info: index + two shard headers.
        FakeModel("mistralai/Mistral-7B-v0.1", mistral, downloads=500000, files=mistral_files),
        # Only a .bin checkpoint: the count must come from config.json.
        FakeModel(
            "facebook/opt-1.3b",
            opt,
            license="other",
            downloads=200000,
            files={"pytorch_model.bin": b"\0" * 16},
        ),
        # Gated: the model info (and its counts) is public, the files are not.
        FakeModel(
            "meta-llama/Llama-3.2-1B",
            llama,
            gated="manual",
            license="llama3.2",
            downloads=2000000,
            safetensors_parameters={"BF16": 1235814400},
            files={"model.safetensors": SafetensorsFile(header=b"", size=2471645608)},
        ),
        # A header over the client's first 100 kB Range read: it needs the second Range GET.
        FakeModel(
            "acme/many-tensors",
            qwen,
            downloads=2,
            files={
                "model.safetensors": SafetensorsFile.build(
                    [(f"blocks.{i}.weight", [10, 10]) for i in range(3000)], "F16"
                )
            },
        ),
        # A model that the tests make slow or faulty on purpose.
        FakeModel("acme/slow-model", qwen, downloads=5, safetensors_parameters={"BF16": 494032768}),
        FakeModel(
            "acme/flaky-model", qwen, downloads=4, safetensors_parameters={"BF16": 494032768}
        ),
        FakeModel(
            "acme/bench-model", qwen, downloads=3, safetensors_parameters={"BF16": 494032768}
        ),
    ]


PRIVATE_REPOS = {"acme/secret-model"}
INVALID_TOKEN = "hf_invalid_token_for_tests"


class FakeHub:
    """Holds the models, faults and request counts; `start()` serves them on 127.0.0.1."""

    def __init__(self, models: list[FakeModel] | None = None):
        self.models: dict[str, FakeModel] = {}
        for model in models if models is not None else default_models():
            self.add(model)
        self.granted_tokens: set[str] = set()
        self.latency = 0.0  # seconds added to every answer (a distant Hub)
        self._delays: dict[str, float] = {}
        self._faults: dict[str, Fault] = {}
        self._counts: Counter[str] = Counter()
        self._log: list[tuple[str, str, str | None]] = []  # method, path, authorization
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- set-up ------------------------------------------------------------------------------

    def add(self, model: FakeModel) -> None:
        self.models[model.repo_id.lower()] = model
        for alias in model.aliases:
            self.models[alias.lower()] = model

    def find(self, repo_id: str) -> FakeModel | None:
        return self.models.get(repo_id.lower())

    def delay(self, repo_id: str, seconds: float) -> None:
        with self._lock:
            self._delays[repo_id.lower()] = seconds

    def fail(self, repo_id: str, status: int, *, times: int = 1, retry_after: int | None = None):
        """The next `times` requests for the repo answer `status` (429 with Retry-After, 5xx)."""
        with self._lock:
            self._faults[repo_id.lower()] = Fault(status, times, retry_after)

    def reset(self) -> None:
        with self._lock:
            self._delays.clear()
            self._faults.clear()
            self._counts.clear()
            self._log.clear()
            self.granted_tokens.clear()
            self.latency = 0.0

    # --- what happened -----------------------------------------------------------------------

    def requests_for(self, prefix: str = "") -> int:
        with self._lock:
            return sum(n for path, n in self._counts.items() if path.startswith(prefix))

    def model_info_requests(self, repo_id: str) -> int:
        return self.requests_for(f"/api/models/{repo_id}")

    def authorizations(self) -> list[str | None]:
        with self._lock:
            return [auth for _, _, auth in self._log]

    def stats(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    # --- serving -----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the fake Hub first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeHub:
        hub = self

        class Handler(_Handler):
            fake_hub = hub

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _record(self, method: str, path: str, authorization: str | None) -> None:
        with self._lock:
            self._counts[path] += 1
            self._log.append((method, path, authorization))

    def _take_fault(self, repo_id: str) -> Fault | None:
        with self._lock:
            fault = self._faults.get(repo_id.lower())
            if fault is None or fault.times <= 0:
                return None
            fault.times -= 1
            return Fault(fault.status, 1, fault.retry_after)

    def _delay_for(self, repo_id: str) -> float:
        with self._lock:
            return self._delays.get(repo_id.lower(), 0.0)


_MODEL_INFO = re.compile(r"^/api/models/(?P<repo>[^/]+(?:/[^/]+)?)(?:/revision/(?P<rev>[^/]+))?$")
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+(?:/[^/]+)?)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")


class _Handler(BaseHTTPRequestHandler):
    fake_hub: FakeHub
    protocol_version = "HTTP/1.1"
    # Headers and body go out as separate writes; without this, Nagle + delayed ACK add ~40 ms
    # to every answer and the fake Hub looks slower than a real one on a LAN.
    disable_nagle_algorithm = True

    def log_message(self, format, *args):  # noqa: A002 - keep test output quiet
        return

    def do_GET(self):  # noqa: N802
        self._dispatch(head=False)

    def do_HEAD(self):  # noqa: N802
        self._dispatch(head=True)

    # --- answers -----------------------------------------------------------------------------

    def _send(
        self,
        status: int,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        *,
        head: bool = False,
        content_type: str = "application/json",
    ) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            if not head:
                self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test)

    def _json(self, status: int, data: Any, headers: dict[str, str] | None = None, *, head=False):
        self._send(status, json.dumps(data).encode(), headers, head=head)

    def _error(
        self,
        status: int,
        message: str,
        code: str | None = None,
        *,
        head=False,
        extra: dict[str, str] | None = None,
    ) -> None:
        headers = {"X-Error-Message": message, "X-Request-Id": "fake-hub", **(extra or {})}
        if code:
            headers["X-Error-Code"] = code
        self._json(status, {"error": message}, headers, head=head)

    # --- routing -----------------------------------------------------------------------------

    def _dispatch(self, *, head: bool) -> None:
        hub = self.fake_hub
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        query = parse_qs(parts.query)
        authorization = self.headers.get("Authorization")
        if path == "/_stats":
            self._json(200, hub.stats(), head=head)
            return
        hub._record(self.command, path, authorization)
        token = authorization.removeprefix("Bearer ").strip() if authorization else None
        if token == INVALID_TOKEN:
            self._error(401, "Invalid credentials in Authorization header", head=head)
            return

        if hub.latency:
            time.sleep(hub.latency)
        if path == "/api/models":
            self._search(query, head=head)
            return
        if path == "/api/agent-harnesses":
            # huggingface_hub fetches this registry once a day to tag its User-Agent.
            self._json(200, {"standardEnvVars": [], "harnesses": {}}, head=head)
            return
        match = _MODEL_INFO.match(path) or _RESOLVE.match(path)
        if match is None:
            self._error(404, "Sorry, we can't find the page you are looking for.", head=head)
            return
        repo = match.group("repo")
        delay = hub._delay_for(repo)
        if delay:
            time.sleep(delay)
        fault = hub._take_fault(repo)
        if fault is not None:
            self._fault(fault, head=head)
            return
        if repo.lower() in PRIVATE_REPOS:
            # What the Hub tells an anonymous caller about a private repo: no error code.
            self._error(
                401,
                "Invalid username or password.",
                head=head,
                extra={"WWW-Authenticate": 'Bearer realm="Authentication required"'},
            )
            return
        model = hub.find(repo)
        if model is None:
            self._error(404, "Repository not found", "RepoNotFound", head=head)
            return
        rev = match.group("rev") or "main"
        if rev not in ("main", model.sha) and not (len(rev) >= 7 and model.sha.startswith(rev)):
            self._error(404, f"Invalid rev id: {rev}", "RevisionNotFound", head=head)
            return
        if "file" in match.groupdict():
            self._resolve(model, match.group("file"), token, head=head)
        else:
            self._json(200, model.info(blobs="true" in query.get("blobs", [])), head=head)

    def _fault(self, fault: Fault, *, head: bool) -> None:
        headers = {}
        if fault.status == 429:
            wait = fault.retry_after if fault.retry_after is not None else 1
            headers = {
                "RateLimit": f'"api";r=0;t={wait}',
                "RateLimit-Policy": '"fixed window";"api";q=500;w=300',
            }
            if fault.retry_after is not None:
                headers["Retry-After"] = str(fault.retry_after)
            self._error(429, "You have been rate-limited.", head=head, extra=headers)
            return
        self._error(fault.status, "Internal Error - We're working hard to fix this.", head=head)

    def _search(self, query: dict[str, list[str]], *, head: bool) -> None:
        hub = self.fake_hub
        term = (query.get("search") or [""])[0].lower()
        limit = int((query.get("limit") or ["20"])[0])
        found = {m.repo_id: m for m in hub.models.values() if term in m.repo_id.lower()}
        ranked = sorted(found.values(), key=lambda m: -m.downloads)[:limit]
        self._json(
            200,
            [
                {
                    "_id": m.repo_id,
                    "id": m.repo_id,
                    "modelId": m.repo_id,
                    "likes": m.likes,
                    "downloads": m.downloads,
                    "private": m.private,
                    "gated": m.gated,
                    "pipeline_tag": m.pipeline_tag,
                    "library_name": m.library_name,
                    "createdAt": "2022-03-02T23:29:04.000Z",
                }
                for m in ranked
            ],
            head=head,
        )

    def _resolve(self, model: FakeModel, filename: str, token: str | None, *, head: bool):
        hub = self.fake_hub
        if model.gated and token not in hub.granted_tokens:
            message = (
                f"Access to model {model.repo_id} is restricted. You must have access to it and "
                "be authenticated to access it. Please log in."
                if token is None
                else f"Access to model {model.repo_id} is restricted and you are not in the "
                "authorized list. Visit the model page to ask for access."
            )
            self._error(401 if token is None else 403, message, "GatedRepo", head=head)
            return
        if filename not in model.files:
            self._error(
                404,
                "Entry not found",
                "EntryNotFound",
                head=head,
                extra={"X-Repo-Commit": model.sha},
            )
            return
        body = model.files[filename]
        etag = hashlib.sha1(f"{model.sha}:{filename}".encode(), usedforsecurity=False).hexdigest()
        headers = {"X-Repo-Commit": model.sha, "ETag": f'"{etag}"', "Accept-Ranges": "bytes"}
        if isinstance(body, bytes):
            self._send(200, body, headers, head=head, content_type="application/octet-stream")
            return
        size = body.size
        wanted = self.headers.get("Range")
        if not wanted:
            if head:
                headers["X-Linked-Size"] = str(size)
                self._send_length(200, size, headers)
                return
            # Whole weight files are never needed for an estimate; refuse rather than stream GBs.
            self._error(
                416,
                "The fake Hub serves safetensors by Range only.",
                extra={"Content-Range": f"bytes */{size}"},
            )
            return
        match = re.fullmatch(r"bytes=(\d+)-(\d*)", wanted.strip())
        if match is None or int(match.group(1)) >= size:
            self._error(
                416,
                "Requested Range Not Satisfiable",
                head=head,
                extra={"Content-Range": f"bytes */{size}"},
            )
            return
        start = int(match.group(1))
        end = min(int(match.group(2)) if match.group(2) else size - 1, size - 1, start + 10**7)
        headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        self._send(
            206, body.read(start, end), headers, head=head, content_type="application/octet-stream"
        )

    def _send_length(self, status: int, length: int, headers: dict[str, str]) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(length))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
        except (BrokenPipeError, ConnectionResetError):
            pass


if __name__ == "__main__":  # python -m tests.support.fake_hub: serve until interrupted
    server = FakeHub().start()
    print(f"fake Hub at {server.url} (HF_ENDPOINT={server.url})", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()
