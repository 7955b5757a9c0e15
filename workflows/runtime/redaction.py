"""What a step's record and the pages show of a rendered config: secret references, never values."""

from __future__ import annotations

from typing import Any

from workflows.engine import literal_credentials
from workflows.engine.secrets import SecretScope
from workflows.runtime.records import Claim

_SECRET_HEADER_WORDS = ("authorization", "key", "token", "secret", "password", "cookie")


def redacted_input(claim: Claim) -> dict[str, Any] | None:
    if claim.call is None:
        # Not run here (a lost lease, a sub-workflow's end): keep what the step recorded.
        kept: dict[str, Any] | None = claim.step.input
        return kept
    return redacted_config(claim.call.config, claim.call.secrets)


def redacted_config(rendered: dict[str, Any], scope: SecretScope | None) -> dict[str, Any]:
    """A rendered config as a record or a page may show it: secret references as
    `{{ secrets.NAME }}`, never values (engine/secrets.py), and secret-looking headers masked."""
    config = dict(scope.masked(rendered) if scope is not None else rendered)
    # Credential-named values that came from data (`?api_key={{ input.k }}`): masked too.
    config = literal_credentials.masked_request(config)
    if isinstance(config.get("headers"), dict):
        config["headers"] = {
            k: ("***" if any(word in k.lower() for word in _SECRET_HEADER_WORDS) else v)
            for k, v in config["headers"].items()
        }
    return config
