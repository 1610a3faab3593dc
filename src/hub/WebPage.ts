/**
 * The hub's page (docs/operations.md, "The hub's page"): the registry explorer at `/` and the chat at
 * `/chat/:didHash`, one HTML shell for both, with the script (`WebClient`) and the style sheet it loads. Everything is
 * a string in the package, so the bundled `mesh` binary serves it without reading files.
 *
 * The page is same-origin with the hub's API, which it reads with plain GETs; its script and style come from the hub
 * only, and the Content-Security-Policy says so. It may connect to any http(s) origin: the chat calls the agent
 * where the registry says it is.
 *
 * Floor: hub (docs/architecture.md §3).
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import { HubApi } from "./HubApi.js"
import { script } from "./WebClient.js"
import { VERSION } from "../core/Version.js"

/** What the page may load and where it may connect: its own script and style only; fetches to agents anywhere. */
export const CONTENT_SECURITY_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self' http: https:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

/** The HTML shell of both views; the script picks the view from the path. */
export const shell = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>agent-mesh hub</title>
<link rel="stylesheet" href="/ui/app.css">
<script type="module" src="/ui/app.js"></script>
</head>
<body>
<header class="top"><a class="brand" href="/">agent-mesh hub</a><span class="version">${VERSION}</span><nav><a href="/">Registry</a><a href="/docs">API</a></nav></header>
<main id="app"><noscript>This page needs JavaScript. The registry itself answers at /v1/agents, /v1/mcp, /v1/skills and /v1/search; see /docs.</noscript></main>
</body>
</html>
`

/** The page's style sheet. `[hidden]` beats every `display` rule (buttons are inline-block), so hidden is hidden. */
export const style = `:root{--fg:#1d2330;--muted:#5b6475;--line:#dde2ea;--bg:#f7f8fb;--card:#fff;--accent:#2557d6;--ok:#13795b;--warn:#a15c00;--bad:#b42318;font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);background:var(--bg)}
*{box-sizing:border-box}body{margin:0}[hidden]{display:none!important}a{color:var(--accent)}code,pre{font:13px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace}
.top{display:flex;align-items:center;gap:1rem;padding:.7rem 1.5rem;background:var(--card);border-bottom:1px solid var(--line)}
.brand{font-weight:700;text-decoration:none;color:var(--fg)}.version{color:var(--muted);font-size:12px}.top nav{margin-left:auto;display:flex;gap:1rem}
main{max-width:1200px;margin:0 auto;padding:1.2rem 1.5rem;display:grid;gap:1.2rem;grid-template-columns:minmax(0,1fr)}
@media (min-width:900px){main:has(> .explorer){grid-template-columns:minmax(0,5fr) minmax(0,7fr)}}
section,.chat-form{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:1rem}
#search{display:flex;gap:.5rem}#search input{flex:1}
input,textarea{font:inherit;padding:.45rem .6rem;border:1px solid var(--line);border-radius:6px;width:100%;background:#fff;color:inherit}
button,.button{font:inherit;padding:.45rem .9rem;border-radius:6px;border:1px solid var(--accent);background:var(--accent);color:#fff;cursor:pointer;text-decoration:none;display:inline-block}
button:disabled{opacity:.5;cursor:default}.more{margin-top:.5rem;background:#fff;color:var(--accent)}
.tabs{display:flex;gap:.25rem;margin:.8rem 0 .3rem;border-bottom:1px solid var(--line)}
.tabs a{padding:.35rem .7rem;text-decoration:none;color:var(--muted);border-bottom:2px solid transparent}.tabs a.active{color:var(--fg);border-color:var(--accent)}
.results{list-style:none;margin:0;padding:0}.item{display:flex;flex-wrap:wrap;align-items:center;gap:.5rem;padding:.5rem 0;border-bottom:1px solid var(--line)}
.item .name{font-weight:600;overflow-wrap:anywhere}.item .hash{color:var(--muted)}.item .chat-link{margin-left:auto}
.kind{font-size:11px;text-transform:uppercase;letter-spacing:.04em;color:var(--muted);border:1px solid var(--line);border-radius:4px;padding:0 .3rem}
.badge{font-size:12px;border-radius:10px;padding:.05rem .5rem;border:1px solid currentColor}.live{color:var(--ok)}.stale{color:var(--warn)}.unknown{color:var(--muted)}
.status{color:var(--muted);margin:.4rem 0}.status.error,.failure{color:var(--bad)}
.fields{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:.25rem 1rem;margin:.5rem 0}.field{display:contents}
dt{color:var(--muted)}dd{margin:0;overflow-wrap:anywhere}h2{margin:.2rem 0 .6rem;font-size:1.2rem;overflow-wrap:anywhere}h3{font-size:1rem;margin:1rem 0 .4rem}
pre.json,pre.snippet{background:var(--bg);border:1px solid var(--line);border-radius:6px;padding:.6rem;overflow:auto;max-height:24rem;margin:0}
.log{display:flex;flex-direction:column;gap:.6rem;min-height:2rem}
.msg{max-width:80%;padding:.55rem .8rem;border-radius:10px;border:1px solid var(--line);background:var(--card);white-space:pre-wrap}
.msg.user{align-self:flex-end;background:#e8efff;border-color:#c9d8ff}.msg.agent{align-self:flex-start}
.msg .who{font-size:11px;color:var(--muted);margin-bottom:.15rem}.msg[data-state=streaming] .text::after{content:"▍";color:var(--muted)}
.chat-form{display:grid;gap:.5rem}.row{display:flex;justify-content:flex-end}
.options label{display:grid;gap:.2rem;margin-top:.5rem;color:var(--muted);font-size:13px}
.approval{margin-top:.6rem;border-color:#f0c36b;background:#fffaf0;white-space:normal}.approval h3{margin-top:0}.approval textarea{margin-top:.5rem}
`

const page = (body: string, contentType: string, extra: Record<string, string> = {}) =>
  HttpServerResponse.text(body, { contentType, headers: { "content-security-policy": CONTENT_SECURITY_POLICY, "referrer-policy": "no-referrer", ...extra } })

/** The page's four routes; each answer is built once and served as it is. */
export const WebLive = HttpApiBuilder.group(HubApi, "web", (handlers) =>
  Effect.sync(() => {
    const html = page(shell, "text/html; charset=utf-8")
    const js = page(script, "text/javascript; charset=utf-8")
    const css = page(style, "text/css; charset=utf-8")
    return handlers
      .handle("explorer", () => Effect.succeed(html))
      .handle("chat", () => Effect.succeed(html))
      .handle("script", () => Effect.succeed(js))
      .handle("style", () => Effect.succeed(css))
  })
)
