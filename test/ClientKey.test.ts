import { assert, describe, it } from "@effect/vitest"
import { clientKey } from "../src/core/internal/clientKey.js"

describe("clientKey", () => {
  it("keys IPv4 by the address, IPv4-mapped IPv6 as IPv4", () => {
    assert.strictEqual(clientKey("203.0.113.7"), "203.0.113.7")
    assert.strictEqual(clientKey("::ffff:203.0.113.7"), "203.0.113.7")
    assert.strictEqual(clientKey("::FFFF:127.0.0.1"), "127.0.0.1")
  })

  it("keys IPv6 by its /64, whatever the spelling of the address", () => {
    const key = "2001:db8:1:2::/64"
    for (const a of ["2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:0db8:0001:0002:0:0:0:9", "2001:DB8:1:2::abcd", "2001:db8:1:2::1%eth0"]) {
      assert.strictEqual(clientKey(a), key, a)
    }
    assert.notStrictEqual(clientKey("2001:db8:1:3::1"), key)
    assert.strictEqual(clientKey("::1"), "0:0:0:0::/64")
    assert.strictEqual(clientKey("fe80::1"), "fe80:0:0:0::/64")
  })

  it("leaves what is not an address as it is", () => {
    for (const a of ["", "unknown", "1:2:3", "g::1", "1::2::3"]) assert.strictEqual(clientKey(a), a, a)
  })
})
