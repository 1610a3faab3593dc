/**
 * Every 5xx, handler failure and provider failure is logged once, with its cause and the correlation id. The code
 * that knows a failure's cause best logs it and marks the error it fails with (`markLogged`); the serving path
 * logs every other 5xx as it answers. docs/operations.md, "Logs".
 *
 * Floor: http (docs/architecture.md §3).
 */
const LOGGED: unique symbol = Symbol.for("agent-mesh/http/FailureLog/logged")

/** Marks `error` as logged already, so that answering it logs nothing more; returns it. */
export const markLogged = <E>(error: E): E => {
  if (typeof error === "object" && error !== null && !(LOGGED in error)) Object.defineProperty(error, LOGGED, { value: true })
  return error
}

/** Whether `error` was logged where it happened. */
export const wasLogged = (error: unknown): boolean => typeof error === "object" && error !== null && LOGGED in error
