"""Secrets bound to hosts: a request that carries a secret goes to the host the graph names, never to one
data chooses.

At save (`graph_issues`): an http request config (an http node, an http compensation) that references
`{{ secrets.NAME }}` anywhere must write its URL's scheme, host and port literally (templates only in
the path, query and fragment); a secret credential that declares a URL (its host) must be sent only
there. At run time (`check_host`, called by the http node before it sends): the resolved URL's host
must be the host the configured URL names, and every secret the request carries must allow that host.
Both checks, so a graph stored before the save check, or a path template that moves the host
(`https://api.example.com{{ input.p }}` with `@evil.example`), still sends nothing.

Plain Python, no Django.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from workflows.engine.errors import GraphIssue, PermanentStepError
from workflows.engine.secrets import references

# scheme://authority, the authority ending at the first / ? or #.
_ORIGIN = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://([^/?#]*)")


def literal_host(url: str) -> str | None:
    """The host a configured URL names literally (lowercased), or None when its scheme, host or port is
    templated or missing."""
    match = _ORIGIN.match(url.strip())
    if match is None or "{{" in match.group(0) or "}}" in match.group(0):
        return None
    return host_of(url)


def host_of(url: str) -> str | None:
    try:
        host = urlsplit(url.strip()).hostname
    except ValueError:
        return None
    return host.lower().rstrip(".") if host else None


def _http_configs(node: Mapping[str, Any]) -> Iterator[tuple[Mapping[str, Any], str]]:
    config = node.get("config")
    if node.get("type") == "http" and isinstance(config, Mapping):
        yield config, "config"
    spec = node.get("compensate")
    if isinstance(spec, Mapping) and spec.get("type") == "http" and isinstance(spec.get("config"), Mapping):
        yield spec["config"], "compensate.config"


def graph_issues(graph: Mapping[str, Any], declared_hosts: Mapping[str, str]) -> list[GraphIssue]:
    """Each http request that sends a secret to a templated host, or to a host its credential does not
    declare (`declared_hosts`: secret name -> host, for credentials that declare one)."""
    issues = []
    nodes = graph.get("nodes")
    for node in nodes if isinstance(nodes, list) else []:
        if not isinstance(node, Mapping):
            continue
        node_id = str(node.get("id"))
        for config, prefix in _http_configs(node):
            names = references(config)
            url = config.get("url")
            if not names or not isinstance(url, str):
                continue
            host = literal_host(url)
            field = f"{prefix}.url"
            if host is None:
                issues.append(GraphIssue(
                    f"node '{node_id}': {field} sends {{{{ secrets.{sorted(names)[0]} }}}}, so its scheme and host "
                    "must be written literally (templates only after the host: path and query)",
                    node=node_id, field=field))
                continue
            for name in sorted(names):
                bound = declared_hosts.get(name)
                if bound and bound != host:
                    issues.append(GraphIssue(
                        f"node '{node_id}': {field} sends credential '{name}' to {host}, but the credential is "
                        f"bound to {bound}", node=node_id, field=field))
    return issues


def check_host(node_id: str, configured_url: str, resolved_url: str, bound: Mapping[str, str]) -> None:
    """Refuse to send a request carrying secrets anywhere but the configured host and the hosts its
    credentials declare (`bound`: name -> host, for the secrets this request carries). Raises
    PermanentStepError naming the hosts (never a value)."""
    saved = literal_host(configured_url)
    resolved = host_of(resolved_url)
    if saved is None:
        raise PermanentStepError(f"node '{node_id}': the URL's host is templated, so its secrets are not sent "
                                 "(write the scheme and host literally)")
    if resolved != saved:
        raise PermanentStepError(f"node '{node_id}': the URL resolved to host {resolved or '(none)'}, not "
                                 f"{saved} as configured: its secrets are not sent")
    for name, host in sorted(bound.items()):
        if host and host != resolved:
            raise PermanentStepError(f"node '{node_id}': credential '{name}' is bound to {host}, not {resolved}: "
                                     "it is not sent")
