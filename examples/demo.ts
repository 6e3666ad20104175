// A program as a model would write it: several tool calls, a little logic,
// and only what it prints or returns comes back.
interface Stock { fruit: string; count: number; available: boolean }

const names: string[] = await tools.fruits(null);
console.log(`checking ${names.length} fruits`);

const stocks = await Promise.all(names.map((fruit) => tools.stock({ fruit }) as Promise<Stock>));
for (const s of stocks) console.log(`${s.fruit}: ${s.count}`);

try {
  await tools.stock({ fruit: "kiwi" });
} catch (e) {
  if (e instanceof ToolCallError) console.warn(`${(e as any).toolName} said: ${e.message}`);
}

return {
  inStock: stocks.filter((s) => s.available).map((s) => s.fruit),
  next: await tools.inc({ v: 41 }),
};
