"""The Tableau client's defaults, each said once.

`TableauServerResource`'s fields, the frozen `ClientSettings`, the transport's
`HttpSettings` and `RetryPolicy`, and the component's `server:` YAML take their defaults
from here; what each means is described on the resource's fields.
"""

from __future__ import annotations

from hyper_assets._base.files import MEGABYTE

SITE = ""  # the default site
API_VERSION: str | None = None  # the server's
PROJECT_MATCH_CASE = False

VERIFY_TLS = True
CONNECT_TIMEOUT_SECONDS = 10.0
TIMEOUT_SECONDS = 300.0

MAX_RETRIES = 5
RETRY_INITIAL_DELAY_SECONDS = 0.5
RETRY_MAX_DELAY_SECONDS = 30.0
RETRY_MAX_TOTAL_SECONDS = 300.0

UPLOAD_CHUNK_BYTES = 50 * MEGABYTE
PUBLISH_AS_JOB_BYTES = 64 * MEGABYTE  # as Tableau's own client
JOB_POLL_INITIAL_SECONDS = 0.5
JOB_POLL_MAX_SECONDS = 30.0
JOB_TIMEOUT_SECONDS = 3600.0
