"""The emulator's own errors: server-side code, which the client never raises.

`RestApiError` is the emulator's refusal of a REST call (answer the request with this
status and Tableau error code), `VdsApiError` its refusal of a VizQL Data Service call; the
client's errors (`hyper_assets.errors`) derive from neither.
`ActionBatchError` and `EmulatorConfigError` are `HyperAssetsError`s, so a caller that
catches the library's root error catches them too.
"""

from __future__ import annotations

from hyper_assets.errors import HyperAssetsError


class RestApiError(Exception):
    """A Tableau REST error reply: HTTP status, Tableau's error code, summary and detail."""

    def __init__(self, status: int, code: str, summary: str, detail: str):
        super().__init__(f"{status} {code} {summary}: {detail}")
        self.status = status
        self.code = code
        self.summary = summary
        self.detail = detail


class ActionBatchError(HyperAssetsError):
    """An action that cannot apply to the target; the whole batch was rolled back."""

    def __init__(self, index: int, action: str, problem: str):
        super().__init__(
            f"action {index} ({action}): {problem.rstrip('.')}. The batch was rolled back; "
            "the target is unchanged."
        )
        self.index = index
        self.action = action
        self.problem = problem


class EmulatorConfigError(HyperAssetsError):
    """The REST emulator cannot start as configured (bad data dir, token or port)."""


class VdsApiError(Exception):
    """A VizQL Data Service error reply: HTTP status and the schema's `TableauError` fields."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
