/**
 * A least-recently-used map with a fixed maximum number of entries: the one shape every cache in the core takes.
 * A cache is an object someone made and holds, never module state, so two runtimes (or two tests) never share
 * entries, and its bound is stated where it is made: inserting past `max` drops the entry used longest ago.
 *
 * Floor: core (docs/architecture.md §3).
 */

/** A map holding at most `max` entries, dropping the least recently used one to make room. */
export class Lru<K, V> {
  // A Map iterates in insertion order; a hit is moved to the end, so the first key is always the coldest.
  private readonly entries = new Map<K, V>()

  constructor(readonly max: number) {
    if (!Number.isSafeInteger(max) || max < 1) throw new RangeError(`an LRU holds at least one entry (max ${max})`)
  }

  /** Number of entries held; never more than `max`. */
  get size(): number {
    return this.entries.size
  }

  /** The value for `key`, now the most recently used; undefined when absent. */
  get(key: K): V | undefined {
    const value = this.entries.get(key)
    if (value !== undefined) {
      this.entries.delete(key)
      this.entries.set(key, value)
    }
    return value
  }

  /** Stores `value` as the most recently used, dropping the least recently used entry when full. */
  set(key: K, value: V): void {
    if (this.entries.has(key)) this.entries.delete(key)
    else if (this.entries.size >= this.max) this.entries.delete(this.entries.keys().next().value as K)
    this.entries.set(key, value)
  }

  /** Drops every entry. */
  clear(): void {
    this.entries.clear()
  }
}
