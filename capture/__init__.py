"""capture: an OpenAI-spec proxy that records exact token ids and logprobs of every model call.

    app = capture.create_capture_app(capture.CaptureSettings())   # mount at /capture, or serve
    session = await app.state.registry.create(capture.EngineRef(url="http://vllm:8000"))
    # point the harness at <proxy>/v1 with session.id as its API key; then
    doc = session.document()

Never imports Harbor, Gradio or `workbench`. Everything not listed in `__all__` is internal.
"""

from capture.dialects.base import AuxAnswer, AuxEngine, ChatCall, Dialect, DialectError, Route
from capture.document import DocumentMeta, build_document, graph_from_document, validate_document
from capture.engines import EngineError, EngineHandle, EnginePool, EngineRef, Probe
from capture.exporters import sequence_records, trace_entries, write_jsonl
from capture.graph import RolloutGraph
from capture.proxy import DIALECTS, create_capture_app
from capture.serving import CaptureServer, ThreadedServer
from capture.sessions import Session, SessionCounters, SessionRegistry, read_session_key
from capture.settings import CaptureSettings, is_public_host
from capture.shaping import Shaped, shape_chat_body
from capture.turns import Turn
from capture.types import SCHEMA_ID, TIER_RANK, Phase, Tier
from capture.validate import Finding, check_rollout, check_turn

__all__ = [
    "DIALECTS",
    "SCHEMA_ID",
    "TIER_RANK",
    "AuxAnswer",
    "AuxEngine",
    "CaptureServer",
    "CaptureSettings",
    "ChatCall",
    "Dialect",
    "DialectError",
    "DocumentMeta",
    "EngineError",
    "EngineHandle",
    "EnginePool",
    "EngineRef",
    "Finding",
    "Phase",
    "Probe",
    "RolloutGraph",
    "Route",
    "Session",
    "SessionCounters",
    "SessionRegistry",
    "Shaped",
    "ThreadedServer",
    "Tier",
    "Turn",
    "build_document",
    "check_rollout",
    "check_turn",
    "create_capture_app",
    "graph_from_document",
    "is_public_host",
    "read_session_key",
    "sequence_records",
    "shape_chat_body",
    "trace_entries",
    "validate_document",
    "write_jsonl",
]
