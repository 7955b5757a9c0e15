/* The MCP tool picker's pure part (tests/js/mcp-list.test.mjs): an llm node's `tools` with one more tool
 * from an MCP server (GET /api/mcp/servers/<name>/tools answers each with its name, description, input
 * schema and ready-made target). */

/** The tools list as a field holds it (JSON text, possibly empty or invalid): an array, or null. */
export function toolsOf(text) {
  if (!String(text || "").trim()) return [];
  try {
    const value = JSON.parse(text);
    return Array.isArray(value) ? value : null;
  } catch (err) {
    return null;
  }
}

/** `tools` with `offered` added as an llm tool: a tool of the same name is replaced (picked again
 * after the server changed its schema), the others keep their order. */
export function withTool(tools, offered) {
  const tool = { name: offered.name, description: offered.description || "",
    parameters: offered.parameters || { type: "object" }, target: offered.target };
  const at = tools.findIndex((t) => t && t.name === tool.name);
  if (at < 0) return [...tools, tool];
  const next = [...tools];
  next[at] = tool;
  return next;
}
