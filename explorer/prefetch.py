"""Download models into the Hugging Face cache ahead of time, for a server that must not wait in class.

    python -m explorer.prefetch bert-base-uncased openai-community/gpt2

Each model is loaded the way the app loads it (config, tokenizer and weights through ``explorer.load_model``,
remote code refused, the attention capture checked), so what is cached is exactly what the app will need. The
Docker image runs this at build time for the chapters' presets. Offline, it says so and exits with status 1.
"""

from __future__ import annotations

import argparse
import sys
import time

from explorer.checks import printable
from explorer.errors import ModelLoadError
from explorer.hosting import HostingPolicy, preview


def prefetch(names: list[str], *, say=print) -> int:
    """Load each model once (downloading it if needed); returns how many failed. What it says is shown with its
    control characters visible: an id typed with an escape sequence, or a Hub's message holding one, is not
    obeyed by the terminal."""
    from explorer.models.loading import load_model

    def tell(line: str) -> None:
        say(printable(line))

    failures = 0
    policy = HostingPolicy(hosted=True)  # only Hub ids, as a hosted server would accept them
    for name in names:
        start = time.monotonic()
        try:
            name = policy.check_model_name(name)
            lm = load_model(name, device="cpu", progress=lambda stage: tell(f"  {stage}"), hub_only=True)
        except ModelLoadError as error:
            failures += 1
            tell(f"✗ {preview(name)}: {error}")
            continue
        tell(f"✓ {name}: {lm.kind}, {lm.num_layers} layers × {lm.num_heads} heads ({time.monotonic() - start:.0f} s)")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+", help="Hugging Face Hub ids")
    args = parser.parse_args(argv)
    return 1 if prefetch(args.models) else 0


if __name__ == "__main__":
    sys.exit(main())
