"""The credentials store: values encrypted at rest, looked up by name for one step attempt at a time.

Encryption is workflows/credentials/crypto.py's: Fernet (AES-128-CBC + HMAC-SHA256, from
`cryptography`) under MultiFernet: the keys come from STEADYFLOW_CREDENTIALS_KEY (comma-separated; the
first encrypts, every one decrypts), so a key is rotated by putting a new one first, running
`manage.py rotate_credentials`, then dropping the old one. With DEBUG (make run) and no key, one is
derived from SECRET_KEY (dashboard/settings.py).

Nothing here returns a value to a page, the API or a log: values leave this module only inside a
SecretScope or a ProviderAccount handed to the node that sends them (engine/secrets.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from django.conf import settings

from workflows.credentials.crypto import decrypt, fernet
from workflows.credentials.crypto import encrypt as encrypt  # re-exported: callers written before the split
from workflows.credentials.rules import CredentialError
from workflows.engine import literal_credentials, secret_hosts
from workflows.engine import secrets as engine_secrets
from workflows.engine.errors import ConfigError, GraphIssue
from workflows.engine.graph import Node
from workflows.engine.nodes import known_kinds
from workflows.engine.validation import validate_graph
from workflows.models import Credential, CredentialKind

MAX_MODELS = 100
MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,99}$")
MAX_VALUE_CHARS = 10_000




def rotate() -> int:
    """Re-encrypt every credential, and every other secret encrypted at rest (webhook and notification
    channel secrets, EncryptedTextField), under the first key; returns how many rows."""
    from django.db import transaction

    from workflows.triggers.models import NotificationChannel, Webhook

    count = 0
    # One transaction (a row that cannot be decrypted leaves every row as it was), each row read under
    # its lock (select_for_update, in id order: two rotations or an edit meanwhile wait, and an edit
    # committed first is what gets re-encrypted, never overwritten with the value read before it).
    with transaction.atomic():
        for credential in Credential.objects.select_for_update().order_by("pk"):
            credential.encrypted_value = fernet().rotate(credential.encrypted_value.encode()).decode()
            credential.save(update_fields=["encrypted_value"])
            count += 1
        # Loading decrypts with any key; saving encrypts with the first.
        for hook in Webhook.objects.select_for_update().order_by("pk"):
            hook.save(update_fields=["secret", "previous_secret"])
            count += 1
        for channel in NotificationChannel.objects.select_for_update().order_by("pk"):
            channel.save(update_fields=["secret"])
            count += 1
    return count


# --- Saving -------------------------------------------------------------------------------------

def clean_fields(name: str, kind: str, base_url: str, models: Any) -> list[str]:
    """Check what a designer typed (not the value); raises CredentialError naming the field."""
    if not engine_secrets.NAME.match(name or ""):
        raise CredentialError("name: letters, digits, _ and -, starting with a letter or _, at most 64 characters")
    if kind not in CredentialKind.values:
        raise CredentialError(f"kind: one of {', '.join(CredentialKind.values)}")
    if kind == CredentialKind.MCP_SERVER:
        if not re.match(r"^https?://[^\s]+$", base_url or ""):
            raise CredentialError("base_url: the MCP server's http(s) endpoint, e.g. https://mcp.example.com/mcp")
        return []
    if kind != CredentialKind.LLM_PROVIDER:
        # A secret may declare the URL (its host) it is bound to: sent nowhere else.
        if base_url and not re.match(r"^https?://[^\s/]+", base_url):
            raise CredentialError("base_url: empty, or the http(s) URL of the only host this secret is sent to")
        return []
    if not re.match(r"^https?://[^\s]+$", base_url or ""):
        raise CredentialError("base_url: an http(s) URL, e.g. https://api.openai.com/v1")
    if not base_url.lower().startswith("https://") and not settings.DEBUG:
        # The key travels with every call: never in clear over the network (plain http: DEBUG only).
        raise CredentialError("base_url: must be https (plain http only with DEBUG), e.g. https://api.openai.com/v1")
    if isinstance(models, str):
        models = [m.strip() for m in re.split(r"[,\s]+", models) if m.strip()]
    if not isinstance(models, list) or len(models) > MAX_MODELS or not all(
            isinstance(m, str) and MODEL_NAME.match(m) for m in models):
        raise CredentialError(f"models: at most {MAX_MODELS} plain model names (letters, digits, ._:/@+-), "
                              "each at most 100 characters")
    return list(dict.fromkeys(models))


def check_value(value: str) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_VALUE_CHARS or "\x00" in value:
        raise CredentialError(f"value: 1 to {MAX_VALUE_CHARS} characters, no NUL")
    return value


# --- Graphs -------------------------------------------------------------------------------------

def known() -> dict[str, str]:
    """Every credential's name and kind (never a value)."""
    return dict(Credential.objects.values_list("name", "kind"))


def declared_hosts(known_names: Mapping[str, str]) -> dict[str, str]:
    """The host each secret credential is bound to (its URL), for those that declare one."""
    rows = Credential.objects.filter(name__in=list(known_names), kind=CredentialKind.SECRET).exclude(base_url="")
    return {name: host for name, url in rows.values_list("name", "base_url")
            if (host := secret_hosts.host_of(url))}


def _raw_keys() -> dict[str, frozenset[str]]:
    return {name: kind.raw_config_keys for name, kind in known_kinds().items()}


def validate(graph: Any, *, imposed_limit: bool = False) -> list[GraphIssue]:
    """The graph's validation (engine/validation.py; `imposed_limit` as there) plus its use of
    credentials: every name a reference or an llm node's `credential` gives must exist, with the right
    kind; conditions may not read secrets; a literal model must be one the provider credential allows."""
    if not isinstance(graph, Mapping):
        return validate_graph(graph, imposed_limit=imposed_limit)
    # The expression checks never see a reference: the renderer never does either (engine/secrets.py).
    issues = validate_graph(engine_secrets.without_references(graph), imposed_limit=imposed_limit)
    # Only a graph that can name a credential reads the table: validating a plain file (validate_workflow)
    # needs no database.
    text = json.dumps(graph, default=str)
    credentials = known() if "secrets" in text or "credential" in text or "mcp" in text else {}
    issues += engine_secrets.check_graph(graph, credentials, _raw_keys())
    # Credentials typed literally into an http request belong in the store (engine/literal_credentials.py).
    issues += literal_credentials.graph_issues(graph)
    # A request that carries a secret names its host literally, one its credential allows.
    issues += secret_hosts.graph_issues(graph, declared_hosts(credentials) if credentials else {})
    for node in graph.get("nodes") or []:
        if not isinstance(node, Mapping) or node.get("type") != "llm" or not isinstance(node.get("config"), Mapping):
            continue
        name = node["config"].get("credential")
        if isinstance(name, str) and credentials.get(name) == CredentialKind.LLM_PROVIDER:
            row = Credential.objects.get(name=name)
            shape = engine_secrets.ProviderAccount(name=name, base_url=row.base_url, api_key="",
                                                   models=tuple(row.allowed_models or ()))
            issues += engine_secrets.check_model(str(node.get("id")), node["config"], shape)
    return issues


# --- Steps --------------------------------------------------------------------------------------

def for_node(node: Node, raw_keys: frozenset[str]) -> tuple[engine_secrets.SecretScope | None,
                                                              engine_secrets.ProviderAccount | None]:
    """The secrets one attempt of `node` may send, and its LLM provider credential. Queries the
    database only when the node references a credential."""
    config = node.config
    names = engine_secrets.references({k: v for k, v in config.items() if k not in raw_keys})
    # The nodes that call an LLM provider themselves: llm, and planner (engine/nodes/planner.py).
    provider_name = config.get("credential") if node.type in ("llm", "planner") else None
    # An MCP tool's server: its endpoint and token, resolved like a provider's.
    expected = CredentialKind.MCP_SERVER if node.type == "mcp" else CredentialKind.LLM_PROVIDER
    if node.type == "mcp":
        provider_name = config.get("server")
    if not names and not provider_name:
        return None, None
    rows = {row.name: row for row in Credential.objects.filter(name__in=[*names, *([provider_name] if provider_name
                                                                                   else [])])}
    values: dict[str, str] = {}
    for name in sorted(names):
        row = rows.get(name)
        if row is None or row.kind != CredentialKind.SECRET:
            # Deleted (or replaced by a provider) since the graph was saved.
            raise ConfigError(f"node '{node.id}': credential '{name}' does not exist (any more)")
        values[name] = decrypt(row.encrypted_value)
    provider: engine_secrets.ProviderAccount | None = None
    if provider_name:
        row = rows.get(str(provider_name))
        if row is None or row.kind != expected:
            what = "MCP server" if expected == CredentialKind.MCP_SERVER else "LLM provider"
            raise ConfigError(f"node '{node.id}': {what} credential '{provider_name}' does not exist (any more)")
        provider = engine_secrets.ProviderAccount(name=row.name, base_url=row.base_url,
                                                  api_key=decrypt(row.encrypted_value),
                                                  models=tuple(row.allowed_models or ()))
    hosts = {name: host for name in values if (row := rows.get(name)) is not None and row.base_url
             and (host := secret_hosts.host_of(row.base_url))}
    scope = engine_secrets.SecretScope(values, scrub_also=(provider.api_key,) if provider else (), hosts=hosts)
    return scope, provider
