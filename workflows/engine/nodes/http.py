from __future__ import annotations

import json
from typing import Any, ClassVar

from workflows.engine import limits, outbound, secret_hosts
from workflows.engine.errors import PermanentStepError, StepError, StepTimeout
from workflows.engine.nodes.base import NodeKind, NodeResult, StepCall
from workflows.engine.nodes.registry import register
from workflows.engine.secrets import SecretScope


@register
class Http(NodeKind):
    """An HTTP request through the guarded outbound client. Sends the step's idempotency key as
    `Idempotency-Key`.

    The URL is typed into a graph, so it is never trusted: internal addresses need
    STEADYFLOW_HTTP_ALLOWLIST. 5xx, 429 and network errors are transient (retried); other 4xx are
    permanent. Redirects are not followed (a 3xx is the output): each target would need its own check.
    """

    name = "http"
    default_queue = "io"
    label = "HTTP request"
    icon = "⇄"
    color = "#0891b2"
    config_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "required": ["url"],
        "additionalProperties": False,
        "properties": {
            "method": {"type": "string", "enum": ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"],
                       "default": "GET", "title": "Method"},
            "url": {"type": "string", "minLength": 1, "title": "URL (templates allowed)"},
            "headers": {"type": "object", "additionalProperties": {"type": "string"}, "title": "Headers"},
            "params": {"type": "object", "title": "Query parameters"},
            "json": {"title": "JSON body"},
            "body": {"type": "string", "title": "Raw body"},
            "timeout_s": limits.number(None, limits.MAX_STEP_TIMEOUT_S, exclusive_minimum=0,
                                       title="Request timeout (s)"),
            "save_as": {"type": "string", "minLength": 1,
                        "title": "Also store the response body in context[...] (the run's result)"},
        },
    }

    def run(self, call: StepCall) -> NodeResult:
        scope = call.secrets or SecretScope({})
        try:
            output = scope.scrub(self._request(call, scope))
        except StepError as exc:
            raise scope.scrub_error(exc) from None
        # The output is the step's; what a later node or the run's result reads is the context.
        save_as = call.config.get("save_as")
        return NodeResult(output=output, context_updates={str(save_as): output["body"]} if save_as else {})

    def _request(self, call: StepCall, scope: SecretScope) -> dict[str, Any]:
        # `config` holds `{{ secrets.NAME }}` as placeholders: revealed only in what is sent; messages
        # name the URL as configured (`shown`), and what comes back is scrubbed by run().
        config = call.config
        shown = str(scope.masked(str(config["url"])))
        url = str(scope.reveal(str(config["url"])))
        if scope.sends_secrets:
            # Secrets go only to the host the graph names and their credentials allow (engine/secret_hosts.py).
            secret_hosts.check_host(call.node.id, str(call.node.config.get("url", "")), url, scope.hosts)
        # Header names are case-insensitive: a configured "idempotency-key" must not travel next to the
        # step's own (the server would see two keys), and a configured traceparent wins in any case.
        headers = {str(k): str(scope.reveal(v)) for k, v in (config.get("headers") or {}).items()
                   if str(k).lower() != "idempotency-key"}
        headers["Idempotency-Key"] = call.idempotency_key
        if not any(name.lower() == "traceparent" for name in headers):
            headers["traceparent"] = call.trace_id
        timeout = float(config.get("timeout_s") or call.node.timeout_s or call.engine.default_timeout_s)
        timeout = outbound.clamp_timeout(timeout)
        try:
            response = outbound.request(
                config.get("method", "GET"), url, policy=outbound.Policy(allowlist=call.engine.http_allowlist),
                timeout_s=timeout, headers=headers, params=scope.reveal(config.get("params")),
                json=scope.reveal(config.get("json")) if "json" in config else None,
                content=scope.reveal(config.get("body")) if "body" in config else None,
            )
        except outbound.DeadlineExceeded:
            raise StepTimeout(f"HTTP request to {shown} timed out after {timeout:g} s") from None
        except outbound.ResponseTooLarge as exc:
            raise PermanentStepError(f"response from {shown} is {exc.message}") from None
        except outbound.UndecodableBody as exc:
            raise PermanentStepError(f"response from {shown} {exc.message}") from None
        except outbound.TransportFailed as exc:
            raise StepError(f"HTTP request to {shown} failed: {exc.message}") from None
        return _output(shown, response, scope)


def _output(url: str, response: outbound.Reply, scope: SecretScope) -> dict[str, Any]:
    status = response.status
    if status >= 500 or status == 429:
        raise StepError(f"HTTP {status} from {url}", details={"status": status})
    if status >= 400:
        raise PermanentStepError(f"HTTP {status} from {url}", details={"status": status,
                                                                        "body": scope.scrub(response.text)[:500]})
    body: Any
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        body = response.text
    return {"status": status, "body": body}
