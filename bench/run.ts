/**
 * `npm run bench`: every suite, each figure beside its baseline measured in the same run. JSON in bench/results/.
 * `npm run bench -- keys envelope` runs only the named suites.
 */
const suites: Record<string, () => Promise<{ run: () => Promise<void> }>> = {
  keys: () => import("./keys.js"),
  envelope: () => import("./envelope.js"),
  json: () => import("./json.js"),
  mandate: () => import("./mandate.js"),
  http: () => import("./http.js"),
  agent: () => import("./agent.js"),
  ledger: () => import("./ledger.js"),
  start: () => import("./start.js"),
  saga: () => import("./saga.js"),
  router: () => import("./router.js"),
  a2a: () => import("./a2a.js"),
  httpsig: () => import("./httpsig.js"),
  postgres: () => import("./postgres.js"),
  tracing: () => import("./tracing.js")
}

const wanted = process.argv.slice(2)
for (const [name, load] of Object.entries(suites)) {
  if (wanted.length > 0 && !wanted.includes(name)) continue
  await (await load()).run()
}
