"""lmstream.Runtime replicas behind Ray Serve's HTTP proxy, as an
OpenAI-compatible endpoint: deploys them on a local Ray (or the cluster
RAY_ADDRESS names), streams one answer through the proxy with the openai
client, and with --keep goes on serving until interrupted.

  pip install "ray[serve]" openai
  python3 examples/ray_serve.py --model models/SmolLM2-135M-Instruct.Q4_1.gguf --replicas 2 --keep
"""
import argparse
import sys
import time

import openai
from ray import serve

from lmstream.ray_serve import app


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a .gguf path or a model name (lmstream pull)")
    ap.add_argument("--replicas", type=int, default=1, help="runtimes, one per Ray actor")
    ap.add_argument("--threads", type=int, default=0, help="each runtime's threads (0: the library's choice)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--keep", action="store_true", help="keep serving after the first answer")
    args = ap.parse_args(argv)

    runtime = {"model_path": args.model}
    if args.threads:
        runtime["threads"] = args.threads
    serve.start(http_options={"host": args.host, "port": args.port})
    # Each replica needs little of Ray's CPU accounting: its runtime runs its
    # own threads, which Ray does not schedule.
    serve.run(app(runtime, num_replicas=args.replicas, ray_actor_options={"num_cpus": 0.1}),
              name="lmstream", route_prefix="/")

    url = f"http://{args.host}:{args.port}/v1"
    client = openai.OpenAI(base_url=url, api_key="unused")
    for chunk in client.chat.completions.create(
            model="lmstream", stream=True, max_tokens=64,
            messages=[{"role": "user", "content": "What is the capital of Japan?"}]):
        for c in chunk.choices:
            print(c.delta.content or "", end="", flush=True)
    print()
    if args.keep:
        print(f"serving on {url} (Ctrl-C stops)", file=sys.stderr)
        try:
            while True:  # a local Ray instance lives as long as this driver
                time.sleep(3600)
        except KeyboardInterrupt:
            serve.shutdown()

if __name__ == "__main__":
    main()
