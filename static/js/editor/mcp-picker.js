/* The MCP tool picker, under an llm node's `tools` field: the MCP server credentials
 * (GET /api/mcp/servers), the tools the chosen one offers with their descriptions and schemas, and
 * "Add" puts the tool into the field as typing it would (the field's own handlers apply and commit it).
 * Designers only (listing reaches the server with its token); nothing is shown to readers. */

import { el, replaceChildren } from "../lib/dom.js";
import { request } from "../lib/api.js";
import { CFG, state } from "./context.js";
import { toolsOf, withTool } from "./mcp-list.js";

export function attachMcpPicker(row) {
  const input = row.querySelector("textarea, input");
  if (!input || state.readOnly || !CFG.urls.mcpServers) return;
  const servers = el("select", { class: "mcp-server", "aria-label": "MCP server" });
  const list = el("ul", { class: "fn-list mcp-tools" });
  const status = el("p", { class: "muted", role: "status" });
  const picker = el("details", { class: "fn-picker mcp-picker" },
    el("summary", {}, "Add a tool from an MCP server"), servers, status, list);
  const add = (tool) => {
    const tools = toolsOf(input.value);
    if (tools === null) {
      status.textContent = "The tools field is not a JSON list: fix it first.";
      return;
    }
    input.value = JSON.stringify(withTool(tools, tool), null, 2);
    input.dispatchEvent(new Event("input", { bubbles: true }));
    input.dispatchEvent(new Event("change", { bubbles: true }));
    status.textContent = `Added ${tool.name}.`;
  };
  const showTools = async () => {
    const name = servers.value;
    replaceChildren(list);
    if (!name) return;
    status.textContent = "asking the server for its tools…";
    try {
      const data = await request("GET", `${CFG.urls.mcpServers}/${encodeURIComponent(name)}/tools`);
      status.textContent = data.tools.length ? "" : "This server offers no tools.";
      replaceChildren(list, data.tools.map((tool) => el("li", {},
        el("button", { type: "button", class: "fn-choice", dataset: { tool: tool.name }, onclick: () => add(tool) },
          el("code", {}, tool.name), el("span", { class: "fn-summary" }, tool.description)))));
    } catch (err) {
      status.textContent = "Could not list the tools: " + err.message;
    }
  };
  picker.addEventListener("toggle", async () => {
    if (!picker.open || servers.options.length) return;
    status.textContent = "loading…";
    try {
      const data = await request("GET", CFG.urls.mcpServers);
      replaceChildren(servers, el("option", { value: "" }, "— choose a server —"),
        ...data.servers.map((s) => el("option", { value: s.name }, s.name)));
      status.textContent = data.servers.length ? "" : "No MCP server credential yet (Credentials page, kind MCP server).";
    } catch (err) {
      status.textContent = "Could not load the MCP servers: " + err.message;
    }
  });
  servers.addEventListener("change", showTools);
  row.querySelector(".field-error").before(picker);
}
