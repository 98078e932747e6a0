"""`python -m workbench.engine --port P [...]`: serve the reference engine (vLLM wire format)."""

import argparse
from pathlib import Path

import uvicorn

from workbench.engine.config import EngineConfig
from workbench.engine.script import load_script
from workbench.engine.server import create_engine_app


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, EngineConfig]:
    p = argparse.ArgumentParser(
        prog="python -m workbench.engine",
        description="CPU reference engine speaking vLLM's OpenAI-compatible wire format.",
    )
    p.add_argument("--port", type=int, default=8001)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--served-model-name", default="workbench-ref")
    p.add_argument(
        "--logprobs-mode",
        choices=["raw_logprobs", "processed_logprobs"],
        default="processed_logprobs",
    )
    p.add_argument("--return-tokens-as-token-ids", action="store_true")
    p.add_argument(
        "--script", type=Path, help="JSON scripted policy (format: workbench/engine/script.py)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed for requests that carry no `seed`")
    p.add_argument(
        "--no-token-ids",
        action="store_true",
        help="ignore return_token_ids, like an engine without it",
    )
    p.add_argument("--max-model-len", type=int, default=32768)
    p.add_argument("--max-logprobs", type=int, default=20, help="cap on top_logprobs (-1: no cap)")
    p.add_argument("--api-key", help="require `Authorization: Bearer KEY` on /v1 routes")
    args = p.parse_args(argv)
    if args.script is not None:
        try:
            script = load_script(args.script)
        except ValueError as exc:
            p.error(str(exc))
    else:
        script = None
    config = EngineConfig(
        served_model_name=args.served_model_name,
        logprobs_mode=args.logprobs_mode,
        return_tokens_as_token_ids=args.return_tokens_as_token_ids,
        script=script,
        seed=args.seed,
        token_ids=not args.no_token_ids,
        max_model_len=args.max_model_len,
        max_logprobs=args.max_logprobs,
        api_key=args.api_key,
    )
    return args, config


def main(argv: list[str] | None = None) -> None:
    args, config = parse_args(argv)
    uvicorn.run(create_engine_app(config), host=args.host, port=args.port, log_level="info")


if __name__ == "__main__":
    main()
