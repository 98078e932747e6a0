"""The reference engine's HTTP app: vLLM's routes, fields and error shapes (WIRE.md §1, §2, §5).

Generation runs in a worker thread (numpy), so the event loop keeps answering `/health` while a
long prompt is prefilled. Streamed answers are generated first, then sent as vLLM's chunks.
"""

import json
import time
import uuid
from collections.abc import Iterator

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ValidationError

from workbench.engine.config import EngineConfig
from workbench.engine.errors import EngineError
from workbench.engine.generation import Engine, GenerationRequest
from workbench.engine.protocol import (
    ChatBody,
    CompletionBody,
    DetokenizeBody,
    GenerateBody,
    TokenizeBody,
)
from workbench.engine.shapes import (
    ChatResult,
    CompletionChoice,
    chat_chunks,
    chat_json,
    completion_chunks,
    completion_json,
)
from workbench.engine.template import normalize_messages
from workbench.engine.toolparse import count_reasoning_tokens, parse_output

VERSION = "0.33.0+workbench.ref"  # the vLLM wire version this engine speaks, locally labelled


def _sse(chunks: Iterator[dict]) -> StreamingResponse:
    async def body():
        for chunk in chunks:
            yield f"data: {json.dumps(chunk, ensure_ascii=False, separators=(',', ':'))}\n\n"
        yield "data: [DONE]\n\n"

    return StreamingResponse(body(), media_type="text/event-stream")


async def _parse[B: BaseModel](request: Request, model: type[B]) -> B:
    raw = await request.body()
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise EngineError(f"JSON decode error: {exc}. Send a JSON object body.") from None
    if not isinstance(data, dict):
        raise EngineError("The request body must be a JSON object.")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        param = ".".join(str(p) for p in first.get("loc", ())) or None
        raise EngineError(str(exc), param=param) from None


def _request_id(request: Request, body: GenerateBody) -> str:
    """vLLM: the `X-Request-Id` header, else the body's `request_id`, else a random id."""
    rid = request.headers.get("x-request-id") or (body.model_extra or {}).get("request_id")
    return str(rid) if rid else uuid.uuid4().hex


def create_engine_app(config: EngineConfig) -> FastAPI:
    """Build the engine app (loads the tokenizer and model weights once, ~0.1 s)."""
    engine = Engine(config)
    tok = engine.tokenizer
    served = config.served_model_name
    created = int(time.time())
    app = FastAPI(title="workbench reference engine", version=VERSION)
    app.state.engine = engine

    if config.api_key:
        bearer = f"Bearer {config.api_key}"

        @app.middleware("http")
        async def _authenticate(request: Request, call_next):
            # vLLM guards only /v1 (and a few other prefixes); /tokenize and /health stay open.
            if (
                request.url.path.startswith("/v1")
                and request.headers.get("authorization") != bearer
            ):
                return JSONResponse({"error": "Unauthorized"}, status_code=401)
            return await call_next(request)

    @app.exception_handler(EngineError)
    async def _engine_error(_: Request, exc: EngineError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(EngineError(str(exc)).body(), status_code=400)

    @app.exception_handler(Exception)
    async def _internal_error(_: Request, exc: Exception) -> JSONResponse:
        err = EngineError(f"Internal error in the reference engine: {exc!r}", status=500)
        return JSONResponse(err.body(), status_code=500)

    def check_model(name: str | None) -> None:
        if name and name != served:
            raise EngineError(
                f"The model `{name}` does not exist. Valid aliases: {served}",
                status=404,
                param="model",
            )

    def max_tokens_for(prompt_len: int, requested: int | None) -> int:
        limit = config.max_model_len
        if prompt_len >= limit:
            raise EngineError(
                f"This model's maximum context length is {limit} tokens. However, your request "
                f"has {prompt_len} input tokens. Please reduce the length of the input messages.",
                param="messages",
            )
        if requested is not None and requested > limit:
            raise EngineError(
                f"max_tokens={requested} cannot be greater than max_model_len={limit}. Please "
                "request fewer output tokens.",
                param="max_tokens",
            )
        room = limit - prompt_len
        return room if requested is None else min(requested, room)

    def check_ids(ids: list[int], param: str) -> list[int]:
        bad = [i for i in ids if not 0 <= i < tok.vocab_size]
        if bad:
            raise EngineError(
                f"Token id {bad[0]} is out of vocabulary (size {tok.vocab_size}).", param=param
            )
        return ids

    def id_options(body: GenerateBody) -> tuple[bool, bool]:
        """(return_token_ids honoured, logprob names as "token_id:N") — both off for --no-token-ids."""
        as_ids = body.return_tokens_as_token_ids
        as_ids = config.return_tokens_as_token_ids if as_ids is None else as_ids
        return config.token_ids and bool(body.return_token_ids), config.token_ids and as_ids

    def gen_request(
        body: GenerateBody,
        prompt_ids: list[int],
        requested: int | None,
        top_n: int | None,
        forced: list[int] | None,
    ) -> GenerationRequest:
        return GenerationRequest(
            prompt_ids=prompt_ids,
            max_tokens=max_tokens_for(len(prompt_ids), requested),
            params=body.sampling_params(tok.vocab_size),
            seed=body.seed,
            stop=body.stops,
            stop_token_ids=check_ids(body.stop_token_ids or [], "stop_token_ids"),
            ignore_eos=body.ignore_eos,
            skip_special=body.skip_special_tokens is not False,
            include_stop_str=body.include_stop_str_in_output,
            top_n=top_n,
            forced=forced,
        )

    async def checked[B: (ChatBody, CompletionBody)](request: Request, model: type[B]) -> B:
        """The parsed body; every refusal (model, fields, sampling ranges) before any work."""
        body = await _parse(request, model)
        check_model(body.model)
        body.check(config.max_logprobs)
        body.sampling_params(tok.vocab_size)
        return body

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        body = await checked(request, ChatBody)
        messages = normalize_messages(body.messages)
        top = (body.top_logprobs or 0) if body.logprobs else None

        def run():
            prompt_ids = engine.render_chat(
                messages,
                body.tools,
                add_generation_prompt=body.add_generation_prompt,
                continue_final_message=body.continue_final_message,
            )
            forced = engine.scripted_ids(messages) if body.add_generation_prompt else None
            req = gen_request(body, prompt_ids, body.requested_max_tokens, top, forced)
            return prompt_ids, engine.generate(req)

        prompt_ids, completion = await anyio.to_thread.run_sync(run)
        parsed = parse_output(completion.text, tools=body.tools_active)
        if body.parallel_tool_calls is False:
            parsed.tool_calls, parsed.tool_call_ends = (
                parsed.tool_calls[:1],
                parsed.tool_call_ends[:1],
            )
        finish = completion.finish_reason
        if parsed.tool_calls and finish == "stop" and not isinstance(body.tool_choice, dict):
            finish = "tool_calls"
        return_ids, as_ids = id_options(body)
        result = ChatResult(
            id=f"chatcmpl-{_request_id(request, body)}",
            model=body.model or served,
            prompt_ids=prompt_ids,
            completion=completion,
            parsed=parsed,
            finish_reason=finish,
            return_ids=return_ids,
            as_ids=as_ids,
            top_logprobs=top,
            include_reasoning=body.include_reasoning,
            reasoning_tokens=count_reasoning_tokens(
                completion.token_ids, tok.think_open, tok.think_close
            ),
        )
        if not body.stream:
            return JSONResponse(chat_json(tok, result))
        options = body.stream_options or None
        return _sse(
            chat_chunks(
                tok,
                result,
                include_usage=bool(options and options.include_usage),
                continuous_usage=bool(options and options.continuous_usage_stats),
            )
        )

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        body = await checked(request, CompletionBody)
        prompt = body.prompt
        if isinstance(prompt, str):
            prompts: list = [prompt]
        elif prompt and all(isinstance(p, int) for p in prompt):
            prompts = [prompt]
        else:
            prompts = list(prompt)

        def run():
            choices = []
            for p in prompts:
                ids = tok.encode(p) if isinstance(p, str) else check_ids(list(p), "prompt")
                if not ids:
                    raise EngineError("Prompt cannot be empty.", param="prompt")
                req = gen_request(body, ids, body.max_tokens or 16, body.logprobs, None)
                choices.append(CompletionChoice(ids, engine.generate(req)))
            return choices

        choices = await anyio.to_thread.run_sync(run)
        return_ids, as_ids = id_options(body)
        shape = {
            "id": f"cmpl-{_request_id(request, body)}",
            "return_ids": return_ids,
            "as_ids": as_ids,
            "logprobs": body.logprobs,
        }
        model = body.model or served
        if not body.stream:
            return JSONResponse(completion_json(tok, model, choices, **shape))
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        return _sse(completion_chunks(tok, model, choices, include_usage=include_usage, **shape))

    @app.post("/tokenize")
    async def tokenize(request: Request) -> JSONResponse:
        body = await _parse(request, TokenizeBody)
        check_model(body.model)
        if body.messages is not None:
            if body.continue_final_message and body.add_generation_prompt:
                raise EngineError(
                    "Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
                    param="continue_final_message",
                )
            ids = engine.render_chat(
                normalize_messages(body.messages),
                body.tools or None,  # /tokenize drops an empty tools list, as vLLM does
                add_generation_prompt=body.add_generation_prompt,
                continue_final_message=body.continue_final_message,
            )
        elif body.prompt is not None:
            ids = tok.encode(body.prompt)
        else:
            raise EngineError("Send either `prompt` or `messages`.", param="prompt")
        strs = [tok.vocab_string(i) for i in ids] if body.return_token_strs else None
        return JSONResponse(
            {
                "count": len(ids),
                "max_model_len": config.max_model_len,
                "tokens": ids,
                "token_strs": strs,
            }
        )

    @app.post("/detokenize")
    async def detokenize(request: Request) -> JSONResponse:
        body = await _parse(request, DetokenizeBody)
        check_model(body.model)
        ids = check_ids(body.tokens, "tokens")
        return JSONResponse({"prompt": tok.decode(ids, skip_special=False)})

    @app.get("/v1/models")
    async def models() -> JSONResponse:
        card = {
            "id": served,
            "object": "model",
            "created": created,
            "owned_by": "vllm",
            "root": served,
            "parent": None,
            "max_model_len": config.max_model_len,
            "permission": [
                {
                    "id": f"modelperm-{served}",
                    "object": "model_permission",
                    "created": created,
                    "allow_create_engine": False,
                    "allow_sampling": True,
                    "allow_logprobs": True,
                    "allow_search_indices": False,
                    "allow_view": True,
                    "allow_fine_tuning": False,
                    "organization": "*",
                    "group": None,
                    "is_blocking": False,
                }
            ],
            "policy": engine.policy,
        }
        return JSONResponse({"object": "list", "data": [card]})

    @app.get("/health")
    async def health() -> Response:
        return Response(status_code=200)

    @app.get("/version")
    async def version() -> JSONResponse:
        return JSONResponse({"version": VERSION})

    return app
