"""Credentials in graphs: `{{ secrets.NAME }}` references, kept out of everything that is recorded.

The template renderer never sees a secret's value. Before a node's config is rendered, each
reference is swapped for an opaque placeholder carrying a nonce made for that one step attempt
(`SecretScope.protect`); rendering leaves placeholders alone (they are not templates), so the
rendered config a step records holds only placeholders, shown as `{{ secrets.NAME }}` (`masked`).
Only the outbound call swaps placeholders for the values (`reveal`), just before it sends, and
whatever comes back (a response body, a provider's error text) is scrubbed of the values before it
is stored (`scrub`). A placeholder that arrives through data (an input value that looks like one)
cannot name a value: the nonce is fresh per attempt and never leaves the process.

Plain Python: the Django side (workflows/credentials/store.py) looks the values up and builds the scope.
"""

from __future__ import annotations

import ast
import json
import re
import secrets as random_tokens
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, quote_plus

from workflows.engine.errors import GraphIssue, StepError

NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_\-]{0,63}"
NAME = re.compile(f"^{NAME_PATTERN}$")
# `{{ secrets.NAME }}` exactly: nothing else may touch a secret inside a template.
REFERENCE = re.compile(r"\{\{\s*secrets\.(" + NAME_PATTERN + r")\s*\}\}")
_TEMPLATE = re.compile(r"\{\{\s*(.*?)\s*\}\}", re.DOTALL)
# What a stored record shows in a reference's place.
SHOWN = "{{{{ secrets.{name} }}}}"
REDACTED = "[redacted]"

# Provider error text: tokens that look like credentials are scrubbed even when they are not ours
# (a provider that echoes some other key, an "Authorization: Bearer ..." in a proxy's error page).
_BEARER = re.compile(r"(?i)\b(bearer|basic|token)(\s+)[A-Za-z0-9._~+/=\-]{8,}")
_KEY_LIKE = re.compile(r"\b(?:sk|pk|rk|ak)-[A-Za-z0-9_\-]{8,}")

# Node kinds whose handlers send their config out (and so may carry references); anywhere else a
# reference would be handed to code that records it.
SENDING_KINDS = frozenset({"http", "llm"})


def references(value: Any) -> set[str]:
    """The credential names `value` (a config, recursively) references."""
    found: set[str] = set()
    for text in _strings(value):
        found.update(REFERENCE.findall(text))
    return found


def _strings(value: Any) -> Iterable[str]:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)


def _map_strings(value: Any, change: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return change(value)
    if isinstance(value, Mapping):
        return {key: _map_strings(item, change) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_map_strings(item, change) for item in value]
    return value


def without_references(value: Any) -> Any:
    """`value` with each `{{ secrets.NAME }}` replaced by plain text: what the template checks see, as
    the renderer never sees a reference either (SecretScope.protect runs first)."""
    return _map_strings(value, lambda text: REFERENCE.sub(lambda m: f"\u27e6secrets.{m.group(1)}\u27e7", text))


def scrub_text(text: str, values: Iterable[str] = ()) -> str:
    """`text` without the given secret values, bearer tokens and `sk-...`-like keys."""
    for value in sorted({v for v in values if v}, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    text = _BEARER.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    return _KEY_LIKE.sub(REDACTED, text)


def _variants(values: Iterable[str]) -> tuple[str, ...]:
    """Each value as an echo may spell it: as sent, URL-encoded (a query string echoed back) and
    JSON-escaped (a body echoed inside a string)."""
    out: list[str] = []
    for value in values:
        if value:
            out += [value, quote(value, safe=""), quote_plus(value), json.dumps(value)[1:-1]]
    return tuple(dict.fromkeys(out))


@dataclass(frozen=True)
class ProviderAccount:
    """An LLM provider credential: where to send, with which key, and the models it may be asked for."""

    name: str
    base_url: str
    api_key: str
    models: tuple[str, ...] = ()


class SecretScope:
    """The secrets one step attempt may send: `values` by name (only those its config references),
    plus other values to scrub from what comes back (a provider account's key)."""

    def __init__(self, values: Mapping[str, str], *, scrub_also: Iterable[str] = (),
                 hosts: Mapping[str, str] | None = None) -> None:
        self._values = dict(values)
        # The host each secret is bound to, for credentials that declare one (engine/secret_hosts.py).
        self.hosts = {name: host for name, host in (hosts or {}).items() if name in self._values and host}
        self._nonce = random_tokens.token_hex(8)
        self._placeholder = re.compile(r"\u27e6secret:(" + NAME_PATTERN + r"):" + self._nonce + r"\u27e7")
        self._scrub = _variants((*self._values.values(), *scrub_also))

    def __bool__(self) -> bool:
        return bool(self._scrub)

    @property
    def sends_secrets(self) -> bool:
        """Whether this attempt holds any secret to send (not only a provider key to scrub)."""
        return bool(self._values)

    def protect(self, value: Any) -> Any:
        """References -> this attempt's placeholders (before template rendering)."""
        def swap(text: str) -> str:
            return REFERENCE.sub(lambda m: f"\u27e6secret:{m.group(1)}:{self._nonce}\u27e7", text)
        return _map_strings(value, swap)

    def reveal(self, value: Any) -> Any:
        """Placeholders -> values: only at send time, on what is sent."""
        def swap(text: str) -> str:
            return self._placeholder.sub(lambda m: self._values.get(m.group(1), ""), text)
        return _map_strings(value, swap)

    def masked(self, value: Any) -> Any:
        """Placeholders -> `{{ secrets.NAME }}`, values -> [redacted]: what a record may show."""
        def swap(text: str) -> str:
            text = self._placeholder.sub(lambda m: SHOWN.format(name=m.group(1)), text)
            return scrub_text(text, self._scrub) if self._scrub else text
        return _map_strings(value, swap)

    def scrub_error(self, error: StepError) -> StepError:
        """The error with its message and details scrubbed (in place; returned for `raise`)."""
        if self._scrub:
            error.message = self.scrub(error.message)
            error.args = (error.message,)
            error.details = self.scrub(error.details)
        return error

    def also_scrub(self, values: Iterable[str]) -> None:
        """Scrub these values too (an LLM provider credential's key)."""
        self._scrub = (*self._scrub, *_variants(values))

    def also_scrub_scope(self, other: SecretScope | None) -> None:
        """Scrub what `other` scrubs too (a tool step: its llm node's secrets, which the model saw)."""
        if other is not None:
            self._scrub = tuple(dict.fromkeys((*self._scrub, *other._scrub)))

    def scrub(self, value: Any) -> Any:
        """What came back (an output, an error), recursively, without any value this scope holds."""
        if not self._scrub:
            return value
        return self.masked(value)

    def scrub_partial(self, text: str) -> str:
        """Text still arriving (a streamed reply so far): scrubbed, and without a tail that could be
        the start of a value (the next chunk may complete it), so no prefix of a secret is shown."""
        text = self.scrub(text)
        for value in self._scrub:
            for n in range(min(len(value) - 1, len(text)), 0, -1):
                if text.endswith(value[:n]):
                    text = text[:-n]
                    break
        return text


# --- Validation -------------------------------------------------------------------------------------

def _expression_names(expression: str) -> set[str]:
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()  # the expression checks report it
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


def _bare_uses(text: str) -> bool:
    """A template placeholder other than `{{ secrets.NAME }}` that reads `secrets`."""
    stripped = REFERENCE.sub("", text)
    return any("secrets" in _expression_names(expr) for expr in _TEMPLATE.findall(stripped))


def _configs(nodes: list[Any]) -> Iterable[tuple[str, str, Mapping[str, Any], str]]:
    """(node id, kind, config, field prefix) of each node, and of each `compensate` given as a node
    of its own (it runs as one: runtime/config.py)."""
    for node in nodes:
        if not isinstance(node, Mapping):
            continue
        if isinstance(node.get("config"), Mapping):
            yield str(node.get("id")), str(node.get("type")), node["config"], "config"
        spec = node.get("compensate")
        if isinstance(spec, Mapping) and isinstance(spec.get("config"), Mapping):
            yield str(node.get("id")), str(spec.get("type", "python")), spec["config"], "compensate.config"


def check_graph(graph: Mapping[str, Any], credentials: Mapping[str, str],
                raw_keys: Mapping[str, frozenset[str]] | None = None) -> list[GraphIssue]:
    """Issues with a graph's use of credentials. `credentials` maps each known name to its kind
    (`secret` or `llm_provider`); `raw_keys` the config keys each node kind leaves unrendered."""
    issues: list[GraphIssue] = []
    nodes = graph.get("nodes") if isinstance(graph, Mapping) else None
    for node_id, kind, config, prefix in _configs(nodes if isinstance(nodes, list) else []):
        raw = (raw_keys or {}).get(kind, frozenset())
        for key, value in config.items():
            names = references(value)
            where = f"{prefix}.{key}"
            if names and (kind not in SENDING_KINDS or key in raw):
                issues.append(GraphIssue(
                    f"node '{node_id}': {{{{ secrets.… }}}} is only sent by http and llm nodes, in their "
                    f"rendered fields; '{key}' of a {kind} node would record it", node=node_id, field=where))
                continue
            for name in sorted(names):
                if credentials.get(name) != "secret":
                    what = "is an LLM provider, not a secret" if name in credentials else "does not exist"
                    issues.append(GraphIssue(f"node '{node_id}': credential '{name}' {what}",
                                             node=node_id, field=where))
            if any(_bare_uses(text) for text in _strings(value)):
                issues.append(GraphIssue(
                    f"node '{node_id}': secrets may only be referenced as {{{{ secrets.NAME }}}}, not used in "
                    "an expression", node=node_id, field=where))
        if kind == "router":
            rules = config.get("rules")
            for i, rule in enumerate(rules if isinstance(rules, list) else []):
                when = rule.get("when") if isinstance(rule, Mapping) else None
                if isinstance(when, str) and ("secrets" in _expression_names(when) or REFERENCE.search(when)):
                    issues.append(GraphIssue(f"node '{node_id}': conditions may not read secrets (rule {i + 1})",
                                             node=node_id, field=f"{prefix}.rules.{i}.when"))
        servers = ([(config.get("server"), f"{prefix}.server")] if kind == "mcp" else
                   [(t["target"].get("server"), f"{prefix}.tools.{i}.target.server")
                    for i, t in enumerate(config.get("tools") or []) if kind == "llm" and isinstance(t, Mapping)
                    and isinstance(t.get("target"), Mapping) and t["target"].get("type") == "mcp"])
        for server, where in servers:
            if not isinstance(server, str) or credentials.get(server) != "mcp_server":
                what = f"is a {credentials[str(server)]}, not an MCP server" if credentials.get(str(server)) \
                    else "does not exist"
                issues.append(GraphIssue(f"node '{node_id}': MCP server credential '{server}' {what}",
                                         node=node_id, field=where))
        if kind == "planner" and isinstance(config.get("allowed_credentials"), list):
            for name in config["allowed_credentials"]:
                if name not in credentials:
                    issues.append(GraphIssue(f"node '{node_id}': allowed credential '{name}' does not exist",
                                             node=node_id, field=f"{prefix}.allowed_credentials"))
        if kind == "llm" and config.get("credential") is not None:
            provider = config.get("credential")
            if not isinstance(provider, str) or credentials.get(provider) != "llm_provider":
                what = "is a secret, not an LLM provider" if credentials.get(str(provider)) else "does not exist"
                issues.append(GraphIssue(f"node '{node_id}': LLM provider credential '{provider}' {what}",
                                         node=node_id, field=f"{prefix}.credential"))
    edges = graph.get("edges") if isinstance(graph, Mapping) else None
    for index, edge in enumerate(edges if isinstance(edges, list) else []):
        when = edge.get("when") if isinstance(edge, Mapping) else None
        if isinstance(when, str) and ("secrets" in _expression_names(when) or REFERENCE.search(when)):
            issues.append(GraphIssue(f"edge {index}: conditions may not read secrets", edge=index, field="when"))
    return issues


def check_model(node_id: str, config: Mapping[str, Any], account: ProviderAccount) -> list[GraphIssue]:
    """A literal model an llm node names must be one its provider credential allows."""
    model = config.get("model")
    if account.models and isinstance(model, str) and "{{" not in model and model not in account.models:
        return [GraphIssue(f"node '{node_id}': model '{model}' is not one credential '{account.name}' allows "
                           f"({', '.join(account.models)})", node=node_id, field="config.model")]
    return []
