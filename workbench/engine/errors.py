"""vLLM's error body: `{"error": {"message", "type", "param", "code"}}` with status = code."""

from http import HTTPStatus

_TYPES = {400: "BadRequestError", 404: "NotFoundError", 500: "InternalServerError"}


class EngineError(Exception):
    """A request the engine refuses; rendered as vLLM's ErrorResponse by the server."""

    def __init__(self, message: str, *, status: int = 400, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.param = param

    def body(self) -> dict:
        kind = _TYPES.get(self.status) or HTTPStatus(self.status).phrase.replace(" ", "") + "Error"
        return {
            "error": {
                "message": self.message,
                "type": kind,
                "param": self.param,
                "code": self.status,
            }
        }
