/**
 * The script of the hub's page (docs/operations.md, "The hub's page"), written here as one self-contained function so
 * that the compiler and the linter check it like the rest of the code; the hub serves its source text as an ES module
 * (`/ui/app.js`). It never runs on the server, and it refers to nothing outside its own body: the function's text is
 * all the browser gets.
 *
 * Two views, chosen by the path: the registry explorer (`/`, with `#agents`, `#mcp`, `#skills`, `#search/<q>` and
 * `#agent/<didHash>`, `#mcp/<didHash>`, `#skill/<didHash>` for what is shown) and the chat (`/chat/<didHash>`). Every
 * value from the registry or an agent goes into the page as text (`textContent`), never as markup: registry entries
 * are written by whoever holds an API key.
 *
 * The chat calls the agent itself, from the browser, so the agent sees the person at the page as its caller and the
 * hub lends nobody its authority; the agent must list the hub's origin in `--allowed-origin`. The page holds no keys
 * and signs nothing: a mesh-sig agent cannot be called from it, and an approval at a human gate is signed by the
 * grantor where the grantor's key is, then pasted here. Each agent's conversation is kept in the tab's sessionStorage
 * (never the bearer token), so a reload does not lose it.
 *
 * Floor: hub (docs/architecture.md §3).
 */

/** The page's code; the hub serves `String(webClient)` called at once. */
export const webClient = function (): void {
  type Json = Record<string, unknown>
  type Child = Node | string | null | undefined | false
  interface Failure {
    readonly code: string
    readonly message: string
    readonly correlationId?: string | undefined
  }

  const app = document.getElementById("app")
  if (app === null) return

  /** An element with attributes (`on…` functions become listeners) and children (strings become text). */
  const h = (tag: string, attrs: Record<string, unknown> = {}, ...children: ReadonlyArray<Child>): HTMLElement => {
    const el = document.createElement(tag)
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue
      if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v as EventListener)
      else el.setAttribute(k, v === true ? "" : String(v))
    }
    for (const c of children) if (c !== null && c !== undefined && c !== false) el.append(c)
    return el
  }
  const clear = (el: Element, ...children: ReadonlyArray<Child>) => {
    el.replaceChildren()
    for (const c of children) if (c !== null && c !== undefined && c !== false) el.append(c)
  }
  const pretty = (v: unknown) => h("pre", { class: "json" }, JSON.stringify(v, null, 2))
  const str = (v: unknown): string => (typeof v === "string" ? v : v === undefined || v === null ? "" : JSON.stringify(v))
  /** A URL part decoded, or as it is when it is not valid percent-encoding (a hand-typed address). */
  const decoded = (s: string): string => {
    try {
      return decodeURIComponent(s)
    } catch {
      return s
    }
  }
  const isRecord = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v)

  /** A hub or agent error body (`{ code, error, correlationId }`) as a failure, or one made up for what is not one. */
  const failureOf = (status: number, body: unknown): Failure =>
    isRecord(body) && typeof body.code === "string"
      ? { code: body.code, message: str(body.error ?? body.message), correlationId: typeof body.correlationId === "string" ? body.correlationId : undefined }
      : { code: `HTTP_${status}`, message: "unexpected answer" }
  const describe = (f: Failure) => `${f.code}: ${f.message}${f.correlationId === undefined ? "" : ` (correlation id ${f.correlationId})`}`

  type HubAnswer = { ok: true; body: Json } | { ok: false; failure: Failure }

  /** GET a JSON resource of this hub. */
  const hubGet = async (path: string): Promise<HubAnswer> => {
    try {
      const res = await fetch(path, { headers: { accept: "application/json" } })
      const body: unknown = await res.json().catch(() => undefined)
      if (res.ok && isRecord(body)) return { ok: true, body }
      return { ok: false, failure: failureOf(res.status, body) }
    } catch (e) {
      return { ok: false, failure: { code: "HUB_UNREACHABLE", message: String(e) } }
    }
  }

  const livenessOf = (record: Json): HTMLElement =>
    typeof record.live === "boolean"
      ? h(
          "span",
          { class: record.live ? "badge live" : "badge stale", title: typeof record.lastSeenAt === "string" ? `last seen ${record.lastSeenAt}` : "never seen" },
          record.live ? "live" : "stale"
        )
      : h("span", { class: "badge unknown", title: "this hub records no liveness" }, "liveness not recorded")

  const field = (label: string, value: Child, cls?: string) => h("div", { class: "field" }, h("dt", {}, label), h("dd", cls === undefined ? {} : { class: cls }, value))

  // A manifest is addressed by its content, so what was read once stays true: the list, the detail pane and the chat
  // share each read. A failed read is not kept, so the next view asks again.
  const manifests = new Map<string, Promise<HubAnswer>>()
  const manifestOf = (cid: string): Promise<HubAnswer> => {
    const known = manifests.get(cid)
    if (known !== undefined) return known
    const got = hubGet(`/v1/manifests/${encodeURIComponent(cid)}`).then((a) => {
      if (!a.ok) manifests.delete(cid)
      return a
    })
    manifests.set(cid, got)
    return got
  }
  /** The name a manifest gives its agent; undefined when it gives none worth showing. */
  const nameIn = (manifest: Json): string | undefined => (typeof manifest.name === "string" && manifest.name.trim() !== "" ? manifest.name : undefined)
  /**
   * An agent's name, from the manifest its record names; a search hit names no manifest, so its record is read first.
   * Undefined when there is none to be had: the page then shows the DID.
   */
  const agentName = async (record: Json): Promise<string | undefined> => {
    let cid = typeof record.manifestCID === "string" ? record.manifestCID : undefined
    if (cid === undefined) {
      const got = await hubGet(`/v1/agents/${encodeURIComponent(str(record.didHash))}`)
      if (!got.ok || typeof got.body.manifestCID !== "string") return undefined
      cid = got.body.manifestCID
    }
    const m = await manifestOf(cid)
    return m.ok ? nameIn(m.body) : undefined
  }

  // ---------------------------------------------------------------- explorer

  const explorer = () => {
    document.title = "Registry · agent-mesh hub"
    const q = h("input", { type: "search", name: "q", id: "q", placeholder: "Search agents, MCP servers and skills", autocomplete: "off", "aria-label": "Search" }) as HTMLInputElement
    const form = h(
      "form",
      {
        id: "search",
        role: "search",
        onsubmit: (e: Event) => {
          e.preventDefault()
          const text = q.value.trim()
          const target = `#${text === "" ? "agents" : `search/${encodeURIComponent(text)}`}`
          // The same search again changes no hash, so no hashchange would run it.
          if (location.hash === target) route()
          else location.hash = target
        }
      },
      q,
      h("button", { type: "submit" }, "Search")
    )
    const tabs = h(
      "nav",
      { class: "tabs", "aria-label": "Registry" },
      h("a", { href: "#agents", "data-tab": "agents" }, "Agents"),
      h("a", { href: "#mcp", "data-tab": "mcp" }, "MCP servers"),
      h("a", { href: "#skills", "data-tab": "skills" }, "Skills")
    )
    const status = h("p", { id: "status", class: "status", role: "status" })
    const list = h("ul", { id: "results", class: "results" })
    const more = h("button", { type: "button", id: "more", class: "more", hidden: true }, "More")
    const detail = h("section", { id: "detail", class: "detail", "aria-live": "polite" })
    clear(app, h("section", { class: "explorer" }, form, tabs, status, list, more), detail)

    const kinds = {
      agents: { path: "/v1/agents", kind: "agent" },
      mcp: { path: "/v1/mcp", kind: "mcp" },
      skills: { path: "/v1/skills", kind: "skill" }
    } as const
    type Tab = keyof typeof kinds

    // An agent's registry record names no agent (its name is in its manifest): `name` is the manifest's, when it has one.
    const item = (kind: string, record: Json, name: string | undefined) => {
      const hash = str(record.didHash)
      const did = str(record.did)
      return h(
        "li",
        { class: "item", "data-kind": kind, "data-did-hash": hash },
        h("a", { href: `#${kind}/${encodeURIComponent(hash)}`, class: "name", title: did }, kind === "agent" ? (name ?? did) : str(record.name) || did),
        h("span", { class: `kind kind-${kind}` }, kind),
        h("code", { class: "hash" }, hash),
        kind === "agent" ? livenessOf(record) : null,
        kind === "agent" ? h("a", { href: `/chat/${encodeURIComponent(hash)}`, class: "chat-link" }, "Chat") : null
      )
    }

    let generation = 0
    const showList = async (tab: Tab, cursor?: string) => {
      const mine = ++generation
      const { path, kind } = kinds[tab]
      tabs.querySelectorAll("a").forEach((a) => a.classList.toggle("active", a.dataset.tab === tab))
      if (cursor === undefined) {
        clear(list)
        more.hidden = true
      }
      status.textContent = "Loading…"
      const got = await hubGet(`${path}?limit=50${cursor === undefined ? "" : `&cursor=${encodeURIComponent(cursor)}`}`)
      if (mine !== generation) return
      if (!got.ok) {
        status.textContent = describe(got.failure)
        return
      }
      const items = Array.isArray(got.body.items) ? got.body.items.filter(isRecord) : []
      const names = await Promise.all(items.map((r) => (kind === "agent" ? agentName(r) : undefined)))
      if (mine !== generation) return
      items.forEach((r, i) => list.append(item(kind, r, names[i])))
      status.textContent = list.children.length === 0 ? `No ${tab === "mcp" ? "MCP servers" : tab} registered.` : ""
      const next = got.body.nextCursor
      more.hidden = typeof next !== "string"
      more.onclick = typeof next === "string" ? () => void showList(tab, next) : null
    }

    const showSearch = async (text: string) => {
      const mine = ++generation
      q.value = text
      tabs.querySelectorAll("a").forEach((a) => a.classList.remove("active"))
      clear(list)
      more.hidden = true
      status.textContent = "Searching…"
      const got = await hubGet(`/v1/search?q=${encodeURIComponent(text)}&limit=50`)
      if (mine !== generation) return
      if (!got.ok) {
        status.textContent = describe(got.failure)
        return
      }
      const items = Array.isArray(got.body.items) ? got.body.items.filter(isRecord) : []
      const names = await Promise.all(items.map((r) => (r.kind === "agent" ? agentName(r) : undefined)))
      if (mine !== generation) return
      items.forEach((r, i) => list.append(item(str(r.kind), r, names[i])))
      status.textContent = items.length === 0 ? `Nothing matches “${text}”.` : `${items.length} found.`
    }

    // Which filling of the detail pane is current: a read that comes back after the pane moved on is dropped, so a
    // slow answer cannot bring back a card the user left.
    let shown = 0
    /** The detail pane with nothing picked: it says what to click. */
    const emptyDetail = () => {
      shown++
      clear(
        detail,
        h("p", { id: "detail-empty", class: "status hint" }, "Pick an agent from the list to see its card and chat with it. MCP servers and skills show their records here too.")
      )
    }

    const showDetail = async (kind: string, hash: string) => {
      const mine = ++shown
      clear(detail, h("p", { class: "status" }, "Loading…"))
      const path = kind === "agent" ? "/v1/agents/" : kind === "mcp" ? "/v1/mcp/" : "/v1/skills/"
      const got = await hubGet(path + encodeURIComponent(hash))
      if (mine !== shown) return
      if (!got.ok) return clear(detail, h("p", { class: "status error" }, describe(got.failure)))
      const r = got.body
      const fields = h("dl", { class: "fields" }, field("didHash", h("code", {}, str(r.didHash))), field("DID", h("code", {}, str(r.did))))
      if (kind === "agent") {
        fields.append(field("liveness", livenessOf(r)))
        if (typeof r.lastSeenAt === "string") fields.append(field("last seen", r.lastSeenAt))
        fields.append(
          field("endpoint", h("code", {}, str(r.endpointUrl))),
          field("key version", str(r.keyVersion)),
          field("public key", h("code", {}, str(r.publicKeyB64))),
          field("manifest CID", h("code", {}, str(r.manifestCID))),
          field("registered", str(r.createdAt)),
          field("updated", str(r.updatedAt))
        )
        const m = await manifestOf(str(r.manifestCID))
        if (mine !== shown) return
        const manifest = h("div", { id: "manifest" }, m.ok ? pretty(m.body) : h("p", { class: "status error" }, describe(m.failure)))
        const didDocument = h("div", { id: "did-document" }, "Loading…")
        clear(
          detail,
          h("h2", {}, (m.ok ? nameIn(m.body) : undefined) ?? str(r.did)),
          h("p", {}, h("a", { href: `/chat/${encodeURIComponent(str(r.didHash))}`, class: "button", id: "open-chat" }, "Chat with this agent")),
          fields,
          h("h3", {}, "Manifest"),
          manifest,
          h("h3", {}, "DID document"),
          didDocument
        )
        const d = await hubGet(`/v1/dids/${encodeURIComponent(str(r.did))}`)
        if (mine !== shown) return
        clear(didDocument, d.ok ? pretty(d.body.document) : h("p", { class: "status error" }, describe(d.failure)))
        return
      }
      fields.prepend(field("name", str(r.name)))
      if (kind === "mcp") fields.append(field("endpoint", h("code", {}, str(r.endpointUrl))))
      if (kind === "skill") fields.append(field("skill type", str(r.skillType)))
      fields.append(field("registered", str(r.createdAt)))
      const tools = Array.isArray(r.tools) ? r.tools.filter(isRecord) : []
      clear(
        detail,
        h("h2", {}, str(r.name)),
        fields,
        kind === "mcp" ? h("h3", {}, `Tools (${tools.length})`) : null,
        kind === "mcp" ? h("ul", { class: "tools" }, ...tools.map((t) => h("li", {}, h("code", {}, str(t.name)), t.inputSchema === undefined ? null : pretty(t.inputSchema)))) : null
      )
    }

    const route = () => {
      const hash = decoded(location.hash.replace(/^#/, ""))
      const slash = hash.indexOf("/")
      const head = slash < 0 ? hash : hash.slice(0, slash)
      const rest = slash < 0 ? "" : hash.slice(slash + 1)
      if (head === "search" && rest !== "") {
        emptyDetail()
        return void showSearch(rest)
      }
      if ((head === "agent" || head === "mcp" || head === "skill") && rest !== "") {
        if (list.children.length === 0 && status.textContent === "") void showList(head === "agent" ? "agents" : head === "mcp" ? "mcp" : "skills")
        return void showDetail(head, rest)
      }
      emptyDetail()
      void showList(head === "mcp" || head === "skills" ? head : "agents")
    }
    window.addEventListener("hashchange", route)
    route()
  }

  // ---------------------------------------------------------------- chat

  /** Reads a Server-Sent Events body, calling `onEvent` per event (with its `id`); resolves when the stream ends. */
  const readEvents = async (body: ReadableStream<Uint8Array>, onEvent: (event: string, data: unknown, id: string | undefined) => void) => {
    const reader = body.getReader()
    const decoder = new TextDecoder()
    let buffer = ""
    const flush = (frame: string) => {
      let event = "message"
      let id: string | undefined
      const data: Array<string> = []
      for (const line of frame.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim()
        else if (line.startsWith("id:")) id = line.slice(3).trim()
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""))
      }
      if (data.length === 0) return
      let parsed: unknown = data.join("\n")
      try {
        parsed = JSON.parse(data.join("\n"))
      } catch {
        // not JSON: handed over as text
      }
      onEvent(event, parsed, id)
    }
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n")
      let end: number
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        flush(buffer.slice(0, end))
        buffer = buffer.slice(end + 2)
      }
    }
    if (buffer.trim() !== "") flush(buffer)
  }

  // A stream cut before its last event is followed again from the last event seen (`Last-Event-ID`): the run goes
  // on at the agent meanwhile, and the agent answers every event after that one, none twice (docs/agent.md §3).
  const RECONNECTS = 3

  const chat = async (didHash: string) => {
    document.title = "Chat · agent-mesh hub"
    const status = h("p", { id: "status", class: "status", role: "status" }, "Looking the agent up…")
    const card = h("section", { class: "agent-card" })
    const log = h("div", { id: "log", class: "log", "aria-live": "polite" })
    clear(app, card, status, log)
    const resolved = await hubGet(`/v1/agents/${encodeURIComponent(didHash)}`)
    if (!resolved.ok) {
      status.textContent = `This hub cannot find agent ${didHash}: ${describe(resolved.failure)}`
      status.classList.add("error")
      return
    }
    const record = resolved.body
    const endpoint = str(record.endpointUrl).replace(/\/+$/, "")
    // The manifest comes from the hub, so it can be read even when the agent refuses this page: it names the agent
    // and says how the agent takes calls.
    const m = await manifestOf(str(record.manifestCID))
    const manifest = m.ok ? m.body : {}
    const fields = h(
      "dl",
      { class: "fields" },
      field("didHash", h("code", {}, str(record.didHash))),
      field("endpoint", h("code", {}, endpoint)),
      field("liveness", livenessOf(record)),
      field("details", h("a", { href: `/#agent/${encodeURIComponent(str(record.didHash))}` }, "in the registry"))
    )
    clear(card, h("h2", { id: "agent-name" }, nameIn(manifest) ?? str(record.did)), fields)

    /** Says that the agent takes signed calls only, which this page cannot make, and where they can be made. */
    const needsSignedCalls = () => {
      status.classList.add("error")
      clear(
        status,
        "This agent needs signed calls (auth mesh-sig): each request must be signed with the caller's own key, and this page holds no keys, so it cannot chat with this agent. Call it where your identity file is, e.g. ",
        h("code", {}, `mesh call ${didHash} "hello" --identity you.identity.json --stream`),
        ", or with AgentClient."
      )
    }
    /** True when every auth mode named is mesh-sig: then nothing this page sends is accepted. */
    const signedOnly = (modes: ReadonlyArray<string>) => modes.length > 0 && modes.every((a) => a === "mesh-sig")
    // An agent whose manifest asks for signed calls is not called at all: whether or not it allows this page's
    // origin, nothing the page could send would be accepted, and its refusal would only hide why.
    const declared = Array.isArray(manifest.auth) ? manifest.auth.map(str) : []
    if (signedOnly(declared)) {
      fields.append(field("auth", declared.join(", ")))
      document.title = `${nameIn(manifest) ?? str(record.did)} · agent-mesh hub`
      return needsSignedCalls()
    }

    // The discovery document says the agent's name, auth mode and memory; reading it also tells whether the agent
    // answers this page at all (its CORS).
    status.textContent = "Reaching the agent…"
    let discovery: Json
    try {
      const res = await fetch(`${endpoint}/.well-known/mesh-agent.json`)
      const body: unknown = await res.json().catch(() => undefined)
      if (!res.ok || !isRecord(body)) throw new Error(describe(failureOf(res.status, body)))
      discovery = body
    } catch (e) {
      status.classList.add("error")
      clear(
        status,
        `This page cannot reach the agent at ${endpoint} (${e instanceof Error ? e.message : String(e)}). Either it is not running, or it does not allow this page's origin: start it with `,
        h("code", {}, `--allowed-origin ${location.origin}`),
        ` (or serving.allowedOrigins: ["${location.origin}"]).`
      )
      return
    }
    const name = str(discovery.name) || nameIn(manifest) || str(record.did)
    clear(card.querySelector("#agent-name") ?? card, name)
    document.title = `${name} · agent-mesh hub`
    const auth = Array.isArray(discovery.auth) ? discovery.auth.map(str) : ["none"]
    const memory = str(discovery.memory) || "none"
    card.querySelector("dl")?.append(field("auth", auth.join(", ")), field("memory", memory))
    if (signedOnly(auth)) return needsSignedCalls()
    status.textContent = ""

    const message = h("textarea", { id: "message", name: "message", rows: 3, placeholder: `Message ${name}`, required: true, "aria-label": "Message" }) as HTMLTextAreaElement
    const token = h("input", { type: "password", id: "bearer", autocomplete: "off", placeholder: "Bearer token" }) as HTMLInputElement
    const mandate = h("textarea", { id: "mandate", rows: 2, placeholder: "A task mandate granted to this agent (optional)" }) as HTMLTextAreaElement
    const capability = h("input", { type: "text", id: "capability", placeholder: "capability (optional)" }) as HTMLInputElement
    const send = h("button", { type: "submit", id: "send" }, "Send") as HTMLButtonElement
    const options = h(
      "details",
      { class: "options", open: auth.includes("bearer") ? true : undefined },
      h("summary", {}, "Run options"),
      auth.includes("bearer") ? h("label", {}, "Bearer token (kept in this tab only, sent to this agent only)", token) : null,
      h("label", {}, "Mandate", mandate),
      h("label", {}, "Capability", capability)
    )
    const form = h(
      "form",
      { id: "chat-form", class: "chat-form", onsubmit: (e: Event) => (e.preventDefault(), void turn()) },
      message,
      h("div", { class: "row" }, send),
      options
    ) as HTMLFormElement
    app.append(form)
    message.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey) {
        e.preventDefault()
        form.requestSubmit()
      }
    })

    let sessionId: string | undefined
    const history: Array<{ role: "user" | "assistant"; content: string }> = []
    // What each paused reply was asked, so a kept conversation can show its approval prompt again.
    const asks = new WeakMap<HTMLElement, Json>()

    // The conversation is kept in this tab's sessionStorage, one entry per agent, so a reload or coming back to the
    // agent in the same tab finds it as it was: the messages, the session id and the history sent to an agent without
    // memory. The bearer token is not kept with it.
    const keptAt = `agent-mesh.chat.${str(record.didHash)}`
    const keep = () => {
      const messages = Array.from(log.querySelectorAll<HTMLElement>(":scope > .msg"), (el) => ({
        role: el.classList.contains("user") ? "user" : "agent",
        text: el.querySelector(".text")?.textContent ?? "",
        state: el.dataset.state ?? "",
        failures: Array.from(el.querySelectorAll(":scope > .failure"), (f) => f.textContent ?? ""),
        asked: el.dataset.state === "paused" ? asks.get(el) : undefined
      }))
      try {
        sessionStorage.setItem(keptAt, JSON.stringify({ sessionId, history, messages }))
      } catch {
        // Storage full or turned off: the chat goes on, only not kept.
      }
    }

    const bubble = (role: "user" | "agent", text = "") => {
      const el = h("div", { class: `msg ${role}`, "data-state": role === "agent" ? "streaming" : "sent", "data-chunks": 0 }, h("div", { class: "who" }, role === "user" ? "you" : name), h("div", { class: "text" }, text))
      log.append(el)
      el.scrollIntoView({ block: "end" })
      return el
    }

    /**
     * POSTs to the agent asking for a stream and feeds each event to the reply bubble (its `data-state` says how it
     * ended); a stream cut short is followed again from its last event, at most `RECONNECTS` times.
     */
    const stream = async (path: "/v1/run" | "/v1/resume", payload: Json, reply: HTMLElement): Promise<void> => {
      const text = reply.querySelector(".text")!
      const headers: Record<string, string> = { "content-type": "application/json", accept: "text/event-stream" }
      if (token.value.trim() !== "") headers.authorization = `Bearer ${token.value.trim()}`
      const fail = (f: Failure) => {
        reply.dataset.state = "error"
        reply.append(h("p", { class: "failure" }, describe(f)))
      }
      // Kept once it ends, and after every event before, so a reload mid-run keeps what had arrived.
      const onEvent = (event: string, data: unknown, id: string | undefined) => {
        seen(event, data, id)
        keep()
      }
      let lastId: string | undefined
      let ended = false
      const seen = (event: string, data: unknown, id: string | undefined) => {
        if (id !== undefined) lastId = id
        const d = isRecord(data) ? data : {}
        if (event === "chunk") {
          text.textContent = (text.textContent ?? "") + str(d.text)
          reply.dataset.chunks = String(Number(reply.dataset.chunks ?? "0") + 1)
          reply.scrollIntoView({ block: "end" })
        } else if (event === "done") {
          ended = true
          if (typeof d.message === "string" && (text.textContent ?? "") === "") text.textContent = d.message
          finished(d, reply)
        } else if (event === "approval_required") {
          ended = true
          paused(d, reply)
        } else if (event === "error") {
          ended = true
          fail(failureOf(0, d))
        }
      }
      for (let attempt = 0; ; attempt++) {
        // A reconnect waits a little longer each time: a network that just dropped is seldom back at once.
        if (attempt > 0) await new Promise((resolve) => setTimeout(resolve, 250 * attempt))
        const again = lastId !== undefined && attempt < RECONNECTS
        let res: Response
        try {
          res = await fetch(endpoint + path, {
            method: "POST",
            headers: lastId === undefined ? headers : { ...headers, "last-event-id": lastId },
            body: JSON.stringify(payload)
          })
        } catch (e) {
          if (again) continue
          return fail({ code: "AGENT_UNREACHABLE", message: `${String(e)}; is the agent running, and does it allow ${location.origin}?` })
        }
        const type = res.headers.get("content-type") ?? ""
        if (!type.includes("text/event-stream") || res.body === null) {
          const body: unknown = await res.json().catch(() => undefined)
          if (res.status === 202 && isRecord(body) && isRecord(body.approvalRequired)) return paused(body, reply)
          if (res.ok && isRecord(body) && typeof body.message === "string") {
            text.textContent = body.message
            return finished(body, reply)
          }
          return fail(failureOf(res.status, body))
        }
        let broken: unknown = undefined
        await readEvents(res.body, onEvent).catch((e: unknown) => (broken = e))
        if (ended) return
        if (lastId !== undefined && attempt < RECONNECTS) {
          reply.dataset.reconnects = String(attempt + 1)
          continue
        }
        return fail(
          broken === undefined
            ? { code: "STREAM_ENDED", message: "the stream ended before the run did" }
            : { code: "STREAM_BROKEN", message: String(broken) }
        )
      }
    }

    const finished = (d: Json, reply: HTMLElement) => {
      if (typeof d.sessionId === "string") sessionId = d.sessionId
      reply.dataset.state = "done"
      history.push({ role: "assistant", content: reply.querySelector(".text")?.textContent ?? "" })
    }

    /** The run paused at a human gate: what is asked, who must sign, and a place to paste the signed approval. */
    const paused = (d: Json, reply: HTMLElement) => {
      if (typeof d.sessionId === "string") sessionId = d.sessionId
      reply.dataset.state = "paused"
      asks.set(reply, d)
      const asked = isRecord(d.approvalRequired) ? d.approvalRequired : {}
      const action = isRecord(asked.asked) ? asked.asked : {}
      const taskId = str(asked.taskId)
      const cap = str(asked.capability)
      const grantor = str(asked.grantor)
      const scopes = Array.isArray(action.dataScopes) ? action.dataScopes.map(str) : []
      const pasted = h("textarea", { class: "approval-input", rows: 5, placeholder: "Paste the signed approval (JSON) here", "aria-label": "Signed approval" }) as HTMLTextAreaElement
      const note = h("p", { class: "status" })
      const snippet = [
        `// approve.mjs: run it where ${grantor}'s identity file is (npm install agent-mesh), then paste what it prints.`,
        `import { readFileSync } from "node:fs"`,
        `import { signApproval } from "agent-mesh/AgentPromise"`,
        `const me = JSON.parse(readFileSync("grantor.identity.json", "utf8"))`,
        `const approval = await signApproval({ taskId: ${JSON.stringify(taskId)}, capability: ${JSON.stringify(cap)}, decision: "approve" /* or "deny" */ }, me.did, me.privateKeyPkcs8B64)`,
        `console.log(JSON.stringify(approval))`
      ].join("\n")
      const resume = h("button", { type: "button", class: "resume" }, "Resume with this approval") as HTMLButtonElement
      const card = h(
        "section",
        { class: "approval", "data-task-id": taskId, role: "alert" },
        h("h3", {}, "Waiting for a human's approval"),
        h(
          "dl",
          { class: "fields" },
          field("action", h("code", {}, cap)),
          typeof action.description === "string" ? field("what", action.description) : null,
          field("reversible", action.reversible === true ? "yes" : "no"),
          scopes.length > 0 ? field("data scopes", scopes.join(", ")) : null,
          field("who must approve", h("code", { class: "grantor" }, grantor)),
          field("task", h("code", {}, taskId)),
          field("approve before", str(asked.expiresAt))
        ),
        h(
          "p",
          {},
          `The agent goes on only with an approval (or a denial) signed with ${grantor}'s key, the grantor of the mandate. This page holds no keys and cannot sign it, nor can the hub: sign it where that key is, then paste it here and the run resumes.`
        ),
        h("details", {}, h("summary", {}, "How to sign it"), h("pre", { class: "snippet" }, snippet)),
        pasted,
        h("div", { class: "row" }, resume),
        note
      )
      reply.append(card)
      card.scrollIntoView({ block: "end" })
      resume.onclick = () => {
        let approval: unknown
        try {
          approval = JSON.parse(pasted.value)
        } catch {
          note.textContent = "That is not JSON: paste the approval object exactly as printed."
          return
        }
        resume.disabled = true
        note.textContent = "Resuming…"
        reply.dataset.state = "streaming"
        void stream("/v1/resume", { taskId, approval }, reply).then(() => {
          if (reply.dataset.state === "error") {
            // The task is still paused after a refused approval: another one may be pasted.
            reply.dataset.state = "paused"
            resume.disabled = false
            note.textContent = "Refused; the task is still waiting."
          } else {
            card.remove()
          }
          keep()
        })
      }
    }

    const turn = async () => {
      const text = message.value.trim()
      if (text === "") return
      message.value = ""
      send.disabled = true
      bubble("user", text)
      const reply = bubble("agent")
      const payload: Json = { message: text }
      if (sessionId !== undefined) payload.sessionId = sessionId
      // An agent that keeps no memory is sent the conversation so far.
      if (memory === "none" && history.length > 0) payload.history = history.slice()
      if (mandate.value.trim() !== "") payload.mandate = mandate.value.trim()
      if (capability.value.trim() !== "") payload.capability = capability.value.trim()
      history.push({ role: "user", content: text })
      keep()
      try {
        await stream("/v1/run", payload, reply)
      } finally {
        keep()
        send.disabled = false
        message.focus()
      }
    }

    /** Shows the conversation kept for this agent, if any, and goes on from it. */
    const restore = () => {
      let kept: unknown
      try {
        kept = JSON.parse(sessionStorage.getItem(keptAt) ?? "null")
      } catch {
        return
      }
      if (!isRecord(kept)) return
      if (typeof kept.sessionId === "string") sessionId = kept.sessionId
      for (const t of Array.isArray(kept.history) ? kept.history.filter(isRecord) : []) {
        if ((t.role === "user" || t.role === "assistant") && typeof t.content === "string") history.push({ role: t.role, content: t.content })
      }
      for (const m of Array.isArray(kept.messages) ? kept.messages.filter(isRecord) : []) {
        if (m.role === "user") {
          bubble("user", str(m.text))
          continue
        }
        const reply = bubble("agent", str(m.text))
        for (const f of Array.isArray(m.failures) ? m.failures : []) reply.append(h("p", { class: "failure" }, str(f)))
        if (m.state === "paused" && isRecord(m.asked)) paused(m.asked, reply)
        else if (m.state === "done" || m.state === "error") reply.dataset.state = m.state
        else {
          // The page went away while this reply streamed; the run may have gone on at the agent, unseen here.
          reply.dataset.state = "error"
          reply.append(h("p", { class: "failure" }, describe({ code: "STREAM_ENDED", message: "this page was left before the run ended" })))
        }
      }
    }
    restore()
    message.focus()
  }

  const chatPath = /^\/chat\/([^/]+)\/?$/.exec(location.pathname)
  if (chatPath !== null) void chat(decoded(chatPath[1]!))
  else explorer()
}

/**
 * The served module: the function's text, called. `__name` is defined for when the module was compiled with names
 * kept (tsx, some bundlers), which wrap named functions in calls to that helper.
 */
export const script = `const __name = (f) => f;\n(${String(webClient)})();\n`
