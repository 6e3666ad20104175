// The floor of ../shared/BENCH.md: one fresh Node process per run that
// evaluates the program (argv[2], plain JS: the body of an async function)
// and answers `tools.<fn>` over newline-delimited JSON on stdio. No worker
// thread, no controller, no token. bench.lua is the other end.
//
//   out (stdout): {"t":"call","id":N,"fn":"inc","args":{...}}
//                 {"t":"log","text":"..."}
//                 {"t":"done","value":...} | {"t":"error","message":"..."}
//   in  (stdin):  {"id":N,"value":...} | {"id":N,"error":"..."}
const program = process.argv[2];
const AsyncFunction = (async () => {}).constructor;
const out = (line) => process.stdout.write(line + "\n");

let next = 0;
const pending = new Map();
const binding = (fn) => (args) =>
  new Promise((resolve, reject) => {
    const id = ++next;
    pending.set(id, { resolve, reject });
    out(JSON.stringify({ t: "call", id, fn, args }));
  });
const tools = { inc: binding("inc") };
const logger = { log: (...a) => out(JSON.stringify({ t: "log", text: a.map(String).join(" ") })) };

let buf = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  buf += chunk;
  let start = 0;
  let nl;
  while ((nl = buf.indexOf("\n", start)) >= 0) {
    const m = JSON.parse(buf.slice(start, nl));
    start = nl + 1;
    const p = pending.get(m.id);
    pending.delete(m.id);
    if ("error" in m) p.reject(new Error(m.error));
    else p.resolve(m.value);
  }
  buf = buf.slice(start);
});

let last;
try {
  const value = await new AsyncFunction("tools", "console", program)(tools, logger);
  last = JSON.stringify({ t: "done", value });
} catch (e) {
  last = JSON.stringify({ t: "error", message: String((e && e.stack) || e) });
}
// Exit once everything written is flushed (a full pipe queues writes).
process.stdout.write(last + "\n", () => process.exit(0));
