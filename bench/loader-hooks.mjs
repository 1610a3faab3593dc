// Hooks of bench/loader.mjs: `.js` specifiers that name TypeScript sources resolve to the `.ts` file, and `.ts`
// files load compiled by esbuild (ESM, node20, types stripped, names not kept).
import { transform } from "esbuild"
import { readFile } from "node:fs/promises"
import { fileURLToPath } from "node:url"

const relative = (specifier) => specifier.startsWith(".") || specifier.startsWith("/") || specifier.startsWith("file:")

export async function resolve(specifier, context, next) {
  try {
    return await next(specifier, context)
  } catch (error) {
    if (relative(specifier) && specifier.endsWith(".js")) return next(`${specifier.slice(0, -3)}.ts`, context)
    throw error
  }
}

export async function load(url, context, next) {
  if (!url.startsWith("file:") || !url.endsWith(".ts")) return next(url, context)
  const file = fileURLToPath(url)
  const { code } = await transform(await readFile(file, "utf8"), { loader: "ts", format: "esm", target: "node20", sourcemap: "inline", sourcefile: file })
  return { format: "module", source: code, shortCircuit: true }
}
