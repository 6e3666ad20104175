// A tiny MCP server built with the official SDK (@modelcontextprotocol/sdk),
// the upstream that spec/mcp_client_spec.lua reaches through bindings/mcp.lua.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "tiny", version: "1.0.0" });

server.registerTool("add", {
  title: "Add",
  description: "Adds two numbers.",
  inputSchema: { a: z.number(), b: z.number() },
  outputSchema: { sum: z.number() },
  annotations: { readOnlyHint: true },
}, async ({ a, b }) => ({
  content: [{ type: "text", text: String(a + b) }],
  structuredContent: { sum: a + b },
}));

server.registerTool("shout", {
  description: "Upper-cases a text.",
  inputSchema: { text: z.string() },
}, async ({ text }) => ({ content: [{ type: "text", text: text.toUpperCase() }] }));

server.registerTool("refuse", {
  description: "Always fails.",
  inputSchema: {},
}, async () => ({ isError: true, content: [{ type: "text", text: "refused, as always" }] }));

server.registerTool("pid", {
  description: "The server's process id.",
  inputSchema: {},
  annotations: { readOnlyHint: true },
}, async () => ({ content: [{ type: "text", text: String(process.pid) }] }));

server.registerTool("die", {
  description: "Exits the server in the middle of the call.",
  inputSchema: {},
}, async () => {
  setTimeout(() => process.exit(3), 10);
  return new Promise(() => {});
});

server.registerTool("sleep", {
  description: "Waits ms milliseconds.",
  inputSchema: { ms: z.number().int() },
}, async ({ ms }) => {
  await new Promise((r) => setTimeout(r, ms));
  return { content: [{ type: "text", text: "slept" }] };
});

await server.connect(new StdioServerTransport());
