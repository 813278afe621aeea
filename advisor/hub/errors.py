"""The Hub lookup's errors and the repo-id rules: what a researcher is told, no client needed.

Kept apart from the client so that the flowchart and the forms can check a repo id without
loading huggingface_hub.
"""

import re

# Error kinds stored on a lookup (HfModelLookup.error_kind) and shown as the way forward.
INVALID_ID = "invalid_id"
NOT_FOUND = "not_found"
GATED = "gated"
PRIVATE = "private"
DISABLED = "disabled"
REVISION_NOT_FOUND = "revision_not_found"
TOKEN_REJECTED = "token_rejected"  # noqa: S105 - an error kind, not a secret
RATE_LIMITED = "rate_limited"
TIMEOUT = "timeout"
UNREACHABLE = "unreachable"
SERVER_ERROR = "server_error"
NO_PARAMETER_COUNT = "no_parameter_count"
UNEXPECTED = "unexpected"

TYPE_BY_HAND = "You can type the parameter count by hand instead."
REQUEST_ACCESS = "Request access on the model's Hub page, then look it up again."


class HubError(Exception):
    """A lookup that did not succeed; `message` is written for the researcher."""

    temporary = False

    def __init__(self, kind: str, message: str, *, suggestions: list[str] | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.suggestions = suggestions or []


class HubTemporaryError(HubError):
    """Worth retrying later; `retry_after` is the Hub's own hint in seconds, when it gave one."""

    temporary = True

    def __init__(self, kind: str, message: str, *, retry_after: float | None = None):
        super().__init__(kind, message)
        self.retry_after = retry_after


class HubPermanentError(HubError):
    """Retrying will not help; the message says what the researcher can do instead."""


class InvalidRepoIdError(HubPermanentError, ValueError):
    def __init__(self, message: str):
        super().__init__(INVALID_ID, message)


# --- Repo id validation ----------------------------------------------------------------------

# The client's own rules (huggingface_hub utils/_validators.py::validate_repo_id), spelled out so
# each failure gets its own message (../shared/hf-hub-notes.md §14.1).
_PART_CHARS = re.compile(r"^[A-Za-z0-9_.-]+$")
_PART_MAX = 96


def validate_repo_id(raw: str) -> str:
    """Return the repo id unchanged if the Hub would accept it, else raise InvalidRepoIdError."""
    if not isinstance(raw, str) or raw == "":
        raise InvalidRepoIdError("Enter a model id such as meta-llama/Llama-3.2-1B.")
    if any(ch.isspace() for ch in raw):
        raise InvalidRepoIdError("A model id has no spaces: use the form organisation/model-name.")
    if "://" in raw or raw.lower().startswith(("huggingface.co", "www.", "hf.co/")):
        raise InvalidRepoIdError(
            "Enter the model id, not a web address: for https://huggingface.co/org/name "
            "type org/name."
        )
    if not raw.isascii():
        raise InvalidRepoIdError("A model id uses only ASCII letters, digits, '-', '_' and '.'.")
    if raw.startswith("/") or raw.endswith("/"):
        raise InvalidRepoIdError("A model id neither starts nor ends with '/'.")
    parts = raw.split("/")
    if len(parts) > 2:
        raise InvalidRepoIdError(
            "A model id has at most one '/': organisation/model-name (not a path to a file)."
        )
    if parts[0] in {"datasets", "spaces"} and len(parts) == 2:
        raise InvalidRepoIdError("That is a dataset or Space, not a model.")
    if ".." in raw or "--" in raw:
        raise InvalidRepoIdError("A model id cannot contain '..' or '--'.")
    if raw.endswith(".git"):
        raise InvalidRepoIdError("A model id does not end with '.git'.")
    for part in parts:
        if not part:
            raise InvalidRepoIdError("Both sides of the '/' must be filled in.")
        if len(part) > _PART_MAX:
            raise InvalidRepoIdError(
                f"Each part of a model id is at most {_PART_MAX} characters; "
                f"'{part[:20]}…' has {len(part)}."
            )
        if not _PART_CHARS.match(part):
            raise InvalidRepoIdError(
                "A model id uses only letters, digits, '-', '_' and '.' "
                "(and one '/' between organisation and name)."
            )
        if part[0] in ".-" or part[-1] in ".-":
            raise InvalidRepoIdError(
                "Each part of a model id starts and ends with a letter or digit."
            )
    return raw


def validate_revision(raw: str) -> str:
    """Branch, tag or commit sha; the Hub quotes it into the URL, so only forbid the silly."""
    # isprintable: no whitespace but the space (refused next) and no NUL, which PostgreSQL
    # refuses to store.
    if (
        not raw
        or len(raw) > 200
        or not raw.isprintable()
        or any(ch.isspace() for ch in raw)
        or ".." in raw
    ):
        raise InvalidRepoIdError("The revision must be a branch, tag or commit sha such as main.")
    return raw
