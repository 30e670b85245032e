// What a TypeScript MCP client pays a `search` call over stdio: the `@modelcontextprotocol/sdk` client, the one
// most desktop assistants and IDEs embed (it checks each answer against the tool's output schema, with ajv).
// Companion of bench/search.py mcp (the Python SDK's client); run by hand, not part of CI. ESM resolves the SDK
// from the script's folder, so copy it next to an install of the SDK:
//
//   mkdir -p /tmp/mcpnode && cd /tmp/mcpnode && npm install @modelcontextprotocol/sdk@1.32.2
//   cp bench/mcp_client_node.mjs /tmp/mcpnode/ && node /tmp/mcpnode/mcp_client_node.mjs \
//       "$(which python)" /tmp/mcp-scifact ../shared/benchmarks/scifact/queries.jsonl 200 [PYTHONPATH]
//
// Prints the p50 wall time of a call, the client's CPU a call and the server process's CPU a call (from
// /proc/PID/stat, in clock ticks, summed over all calls). PYTHONPATH: run the server from another citeline source.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import fs from "node:fs";

const [python, index, queriesFile, calls, pythonpath] = process.argv.slice(2);
const n = Number(calls);
const queries = fs.readFileSync(queriesFile, "utf8").trim().split("\n").slice(0, 300).map((line) => JSON.parse(line).text);
const env = { ...process.env };
if (pythonpath) env.PYTHONPATH = pythonpath;
// `python -m` puts its working folder first on sys.path, ahead of PYTHONPATH: another source runs from its folder.
const transport = new StdioClientTransport({
  command: python,
  args: ["-m", "citeline.cli.main", "mcp", "--index", index],
  env,
  cwd: pythonpath || process.cwd(),
  stderr: "ignore",
});
const client = new Client({ name: "citeline-bench", version: "1" });
await client.connect(transport);
await client.listTools(); // the client caches the output schemas it checks answers against
const serverCpuMs = () => {
  const fields = fs.readFileSync(`/proc/${transport.pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10; // utime + stime, at 100 ticks a second
};
const search = (query) => client.callTool({ name: "search", arguments: { query, k: 10, mode: "hybrid" } });
for (const query of queries.slice(0, 10)) await search(query); // warm-up
const walls = [];
const cpu = process.cpuUsage();
const server = serverCpuMs();
for (let i = 0; i < n; i++) {
  const started = performance.now();
  const result = await search(queries[i % queries.length]);
  walls.push(performance.now() - started);
  if (result.isError || !result.structuredContent) throw new Error(`bad answer: ${JSON.stringify(result.content)}`);
}
const client_ = process.cpuUsage(cpu);
const serverMs = serverCpuMs() - server;
walls.sort((a, b) => a - b);
console.log(
  `${n} calls: p50 ${walls[Math.floor(n / 2)].toFixed(2)} ms; client CPU ${((client_.user + client_.system) / 1000 / n).toFixed(2)} ` +
    `ms a call; server process CPU ${(serverMs / n).toFixed(2)} ms a call`,
);
await client.close();
