"""The emulator's refusal: answer the request with this status and Tableau error code.

Server-side only: the client's errors (`hyper_assets.errors`) do not derive from it.
"""

from __future__ import annotations


class RestApiError(Exception):
    """A Tableau REST error reply: HTTP status, Tableau's error code, summary and detail."""

    def __init__(self, status: int, code: str, summary: str, detail: str):
        super().__init__(f"{status} {code} {summary}: {detail}")
        self.status = status
        self.code = code
        self.summary = summary
        self.detail = detail
