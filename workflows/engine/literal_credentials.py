"""Credentials typed literally into a graph: found at save, so they never reach the version API, diffs,
the editor or a run's step inputs (every viewer reads those).

Where an http request is configured (an http node, an http compensation, an llm tool's http target),
a value is a credential literal when it is typed (not a `{{ ... }}` template) and

- it is a header whose name says credential (`Authorization`, `X-Api-Key`, `Cookie`, anything with
  token/secret/password/auth/api-key in it) and holds more than an auth scheme word (`Bearer`);
- it is a query parameter (in the URL or `params`) or a JSON body key whose name says credential
  (token, secret, password, api_key, access_token, client_secret, ...; a bare `key` only with a
  key-like value), a `name=value` pair of the same kind in a raw body, or a URL's user:password;
- or it looks like a key wherever it is in those places: a known key prefix (`sk-`, `ghp_`, `AKIA`,
  `xoxb-`, a JWT) or a long high-entropy token.

The message names the node and the field and points to `{{ secrets.NAME }}` (the credentials store,
workflows/credentials/store.py). Values that come from data (`{{ input.key }}`) are not literals; what the
step records of them is masked by workflows/runtime/redaction.py. Plain Python, no Django.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import parse_qsl, unquote_plus, urlsplit, urlunsplit

from workflows.engine.errors import GraphIssue
from workflows.engine.secrets import REFERENCE

_TEMPLATE = re.compile(r"\{\{.*?\}\}", re.DOTALL)
_SCHEME_WORDS = re.compile(r"(?i)^\s*(bearer|basic|token|digest|apikey|key)\b\s*")
# A header name that says credential.
SECRET_HEADER = re.compile(r"(?i)(authorization|auth|token|secret|password|passwd|api[-_]?key|cookie|"
                           r"session|credential|signature|^x-.*-key$|^key$)")
# A parameter or body key that says credential (whole words between _ - . separators, or glued forms).
# The secret word ends the name: `access_token`, `client_secret`, `api_key`, `password`; not `token_count`.
SECRET_NAME = re.compile(r"(?i)(^|[_\-.])(token|accesstoken|secret|password|passwd|pwd|passphrase|"
                         r"api[_\-]?key|apikey|access[_\-]?key|secret[_\-]?key|private[_\-]?key|auth|"
                         r"authorization|credentials?|session[_\-]?id|signature)$")
WEAK_NAME = re.compile(r"(?i)(^|[_\-.])key$")
KEY_PREFIX = re.compile(r"^(sk|pk|rk)[-_][A-Za-z0-9_\-]{8,}|^gh[pousr]_[A-Za-z0-9]{16,}|^github_pat_|"
                        r"^xox[abposr]-|^AKIA[0-9A-Z]{12,}|^AIza[0-9A-Za-z_\-]{20,}|"
                        r"^eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.")
_RAW_PAIR = re.compile(r"(?i)([A-Za-z_][A-Za-z0-9_\-.]*)\s*[=:]\s*\"?([^\"&\s,;}]+)")
MIN_ENTROPY_CHARS = 24
MIN_ENTROPY_BITS = 4.2  # per character: random base64 is ~4.5 and up; a hex UUID stays at or under 4


def literal_part(value: str) -> str:
    """`value` without its templates: what a designer typed."""
    return _TEMPLATE.sub("", value).strip()


def entropy(text: str) -> float:
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def looks_like_key(text: str) -> bool:
    """A typed value that looks like a credential wherever it is."""
    if KEY_PREFIX.search(text):
        return True
    return (len(text) >= MIN_ENTROPY_CHARS and not re.search(r"\s", text) and re.search(r"[A-Za-z]", text) is not None
            and re.search(r"\d", text) is not None and entropy(text) >= MIN_ENTROPY_BITS)


def name_says_secret(name: str, value: str) -> bool:
    if SECRET_NAME.search(name):
        return bool(value)
    # A bare `key` (or `..._key`) is often a lookup key: only a key-like value counts.
    return bool(WEAK_NAME.search(name)) and looks_like_key(value)


def _values(value: Any, path: str) -> Iterator[tuple[str, str, str]]:
    """(key, dotted path, typed string) of every string in a JSON value, keyed by its nearest key."""
    stack: list[tuple[str, str, Any]] = [("", path, value)]
    while stack:
        key, where, item = stack.pop()
        if isinstance(item, str):
            yield key, where, literal_part(item)
        elif isinstance(item, Mapping):
            stack.extend((str(k), f"{where}.{k}", v) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((key, f"{where}.{i}", v) for i, v in enumerate(item))


def http_config_findings(config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field under the config, what was found) for each credential literal in an http config."""
    found: list[tuple[str, str]] = []
    url = config.get("url")
    if isinstance(url, str):
        typed = _TEMPLATE.sub("", url)
        try:
            parts = urlsplit(typed)
            password = parts.password
            query = parse_qsl(parts.query, keep_blank_values=False)
        except ValueError:
            password, query = None, []
        if password:
            found.append(("url", "a password in the URL"))
        for name, value in query:
            if name_says_secret(name, value.strip()) or looks_like_key(value.strip()):
                found.append(("url", f"a credential in the URL's query parameter '{name}'"))
    headers = config.get("headers")
    for name, value in (headers.items() if isinstance(headers, Mapping) else []):
        typed = _SCHEME_WORDS.sub("", literal_part(value)) if isinstance(value, str) else ""
        if typed and (SECRET_HEADER.search(str(name)) or looks_like_key(typed)):
            found.append((f"headers.{name}", f"a credential in the header '{name}'"))
    for field in ("params", "json"):
        for key, where, typed in _values(config.get(field), field):
            if typed and (name_says_secret(key, typed) or looks_like_key(typed)):
                found.append((where, f"a credential in '{key or where}'"))
    body = config.get("body")
    if isinstance(body, str):
        typed = literal_part(body)
        for name, value in _RAW_PAIR.findall(typed):
            if name_says_secret(name, value) or looks_like_key(value):
                found.append(("body", f"a credential in the body's '{name}'"))
                break
        else:
            if any(looks_like_key(word) for word in re.split(r"[\s\"'&=,:;{}\[\]]+", typed)):
                found.append(("body", "a key-like value in the body"))
    return found


def _http_configs(node: Mapping[str, Any]) -> Iterator[tuple[Mapping[str, Any], str]]:
    """Each http request config a node carries, with its field prefix."""
    config = node.get("config")
    if node.get("type") == "http" and isinstance(config, Mapping):
        yield config, "config"
    tools = config.get("tools") if isinstance(config, Mapping) and node.get("type") == "llm" else None
    for i, tool in enumerate(tools if isinstance(tools, list) else []):
        target = tool.get("target") if isinstance(tool, Mapping) else None
        if isinstance(target, Mapping) and target.get("type") == "http" and isinstance(target.get("config"), Mapping):
            yield target["config"], f"config.tools.{i}.target.config"
    spec = node.get("compensate")
    if isinstance(spec, Mapping) and spec.get("type") == "http" and isinstance(spec.get("config"), Mapping):
        yield spec["config"], "compensate.config"


def graph_issues(graph: Mapping[str, Any]) -> list[GraphIssue]:
    """Every credential literal in the graph's http requests, each naming the node and the field."""
    issues = []
    nodes = graph.get("nodes")
    for node in nodes if isinstance(nodes, list) else []:
        if not isinstance(node, Mapping):
            continue
        node_id = str(node.get("id"))
        for config, prefix in _http_configs(node):
            for field, what in http_config_findings(config):
                where = f"{prefix}.{field}"
                issues.append(GraphIssue(
                    f"node '{node_id}': {where} holds {what}, typed into the graph (every viewer sees it): "
                    "store it in the credentials store (/credentials/) and reference it as {{ secrets.NAME }}",
                    node=node_id, field=where))
    return issues


# --- What a record shows of a rendered request -----------------------------------------------------

MASK = "***"


def _mask_value(name: str, value: Any) -> Any:
    if isinstance(value, str) and value:
        # A secret reference (`{{ secrets.NAME }}`, how a record shows a secret) says which one was sent.
        rest = _SCHEME_WORDS.sub("", REFERENCE.sub("", value)).strip()
        if rest and (name_says_secret(name, rest) or looks_like_key(rest)):
            return MASK
        return value
    if isinstance(value, Mapping):
        return {k: _mask_value(str(k), v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask_value(name, v) for v in value]
    return value


def _masked_url(url: str) -> str:
    """The URL with a password and credential-named (or key-like) query values masked; every other
    part kept exactly as written."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return url
    netloc = parts.netloc
    if password:
        netloc = netloc.replace(f":{password}@", f":{MASK}@", 1)
    pieces = []
    for piece in parts.query.split("&") if parts.query else []:
        name, sep, value = piece.partition("=")
        shown = _mask_value(unquote_plus(name), unquote_plus(value)) if sep else value
        pieces.append(f"{name}={MASK}" if sep and shown == MASK else piece)
    query = "&".join(pieces)
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def masked_request(config: Mapping[str, Any]) -> dict[str, Any]:
    """A rendered http config as a step record shows it: values that came from data into a
    credential-named query parameter, param or JSON body key (or that look like keys) become ***.
    Secret references are masked before this (engine/secrets.py); headers by runtime/redaction.py."""
    out = dict(config)
    if isinstance(out.get("url"), str):
        out["url"] = _masked_url(out["url"])
    for field in ("params", "json"):
        if field in out:
            out[field] = _mask_value("", out[field])
    return out
