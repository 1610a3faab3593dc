import * as HttpClient from "@effect/platform/HttpClient"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { isNonPublicAddress, layerHttpClient } from "../../src/hub/OutboundAddress.js"
import { countingListener } from "../support/countingListener.js"

/** What a GET of `url` through the outbound client under `urls` ends with: the status, or the failure's cause code. */
const get = (url: string, urls: "public" | "any") =>
  Effect.flatMap(HttpClient.HttpClient, (c) => c.get(url)).pipe(
    Effect.map((r) => String(r.status)),
    Effect.catchAll((e) => Effect.succeed(String((e as { readonly cause?: { readonly code?: string } }).cause?.code ?? e._tag))),
    Effect.provide(layerHttpClient(urls)),
    Effect.scoped
  )

describe("OutboundAddress", () => {
  it("special-purpose ranges and every IPv4-embedding IPv6 form are not public; ordinary addresses are", () => {
    for (const a of [
      "127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.0.1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "224.0.0.1", "not-an-ip",
      "::1", "::", "fe80::1", "fd00::1", "ff02::1",
      "::ffff:127.0.0.1", "::ffff:169.254.169.254", // IPv4-mapped, judged by the IPv4 address
      "::127.0.0.1", "::7f00:1", "::a00:1", // IPv4-compatible (deprecated), written both ways
      "::ffff:0:7f00:1", // IPv4-translated
      "64:ff9b::7f00:1", "64:ff9b::808:808", "64:ff9b:1::a00:1", // NAT64, well-known and local-use prefixes
      "2002:7f00:1::1", "2002:808:808::1", // 6to4
      "2001:0:4136:e378:8000:63bf:3fff:fdd2", // Teredo
      "fec0::1", "fec0:0:0:1::7f00:1", // site-local
      "2001:db8::1", "100::1"
    ]) {
      assert.isTrue(isNonPublicAddress(a), a)
    }
    for (const a of ["8.8.8.8", "1.1.1.1", "172.32.0.1", "93.184.216.34", "2606:4700:4700::1111", "2a00:1450:4001:80b::200e", "::ffff:8.8.8.8"]) {
      assert.isFalse(isNonPublicAddress(a), a)
    }
  })

  it.live("refused at connect time: IPv4 and IPv6 literals in every loopback form, and a name that resolves to loopback; allowed under any", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const v4 = yield* countingListener()
        for (const url of [`http://127.0.0.1:${v4.port}/`, `http://[::ffff:127.0.0.1]:${v4.port}/`, `http://[::ffff:7f00:1]:${v4.port}/`, `http://localhost:${v4.port}/`]) {
          assert.strictEqual(yield* get(url, "public"), "ENOTPUBLIC", url)
        }
        assert.strictEqual(v4.hits(), 0)
        assert.strictEqual(yield* get(`http://127.0.0.1:${v4.port}/`, "any"), "200")
        assert.strictEqual(v4.hits(), 1)
      })
    ))
})
