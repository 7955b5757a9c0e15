"""The editor's MCP tool picker: the MCP server credentials, and the tools one of them offers (its
tools/list, called through the guarded outbound client like any MCP call: engine/mcp_client.py).
Designers only, since asking a server for its tools reaches out with its token."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, JsonResponse

from dashboard.api.core import api_view, error
from dashboard.security import permissions
from workflows.credentials.crypto import decrypt
from workflows.engine import mcp_client, outbound
from workflows.engine.errors import StepError
from workflows.models import Credential, CredentialKind

LIST_TIMEOUT_S = 10.0


@api_view(("GET",), perm=(permissions.VIEW_GRAPHS, permissions.SAVE_VERSION))
def servers(request: HttpRequest) -> JsonResponse:
    rows = Credential.objects.filter(kind=CredentialKind.MCP_SERVER).order_by("name")
    return JsonResponse({"servers": [{"name": row.name, "description": row.description} for row in rows]})


@api_view(("GET",), perm=(permissions.VIEW_GRAPHS, permissions.SAVE_VERSION))
def tools(request: HttpRequest, name: str) -> JsonResponse:
    row = Credential.objects.filter(name=name, kind=CredentialKind.MCP_SERVER).first()
    if row is None:
        return error(404, f"no MCP server credential named {name!r}")
    session = mcp_client.McpSession(row.name, row.base_url, decrypt(row.encrypted_value),
                                    policy=outbound.Policy(allowlist=tuple(settings.STEADYFLOW["HTTP_ALLOWLIST"])),
                                    timeout_s=LIST_TIMEOUT_S)
    try:
        session.initialize()
        offered = session.list_tools()
    except StepError as exc:
        return error(502, exc.message)
    return JsonResponse({"server": row.name, "tools": [
        {"name": t["name"], "description": str(t.get("description") or ""),
         "parameters": t.get("inputSchema") if isinstance(t.get("inputSchema"), dict) else {"type": "object"},
         "target": {"type": "mcp", "server": row.name, "tool": t["name"]}} for t in offered]})
