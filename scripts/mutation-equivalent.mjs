// Mutants no test can tell from the original, each with why (read by scripts/mutation-summary.mjs). A mutant matches
// on its file, its mutator, the start of the code it replaces and, if given, its replacement and a part of its line.
const placeholderList = "a default empty list becomes one placeholder name: it differs only for a name that is exactly \"Stryker was here\""
const tagKey = "the service's Context key: no other service in the runtime is keyed \"\", so every lookup finds the same service"

export const equivalent = [
  { file: "src/core/TaskGuard.ts", mutator: "ArrayDeclaration", original: "[]", replacement: "[\"Stryker was here\"]", reason: placeholderList },
  { file: "src/core/TaskGuard.ts", mutator: "StringLiteral", original: "\"agent-mesh/TaskGuard\"", reason: tagKey },
  { file: "src/core/SpendingGuard.ts", mutator: "StringLiteral", original: "\"agent-mesh/SpendingGuard\"", reason: tagKey },
  {
    file: "src/core/Constraints.ts",
    mutator: "ArrayDeclaration",
    original: "[]",
    line: "payment: [],",
    reason: "CHILD_KINDS.payment: a child kind is a MandateKind, and no kind is named \"Stryker was here\""
  },
  { file: "src/core/Constraints.ts", mutator: "ArrayDeclaration", original: "[]", replacement: "[\"Stryker was here\"]", line: "?? []", reason: placeholderList },
  {
    file: "src/core/Constraints.ts",
    mutator: "ConditionalExpression",
    original: "typeof u === \"number\"",
    replacement: "true",
    reason: "Number.isSafeInteger is false for every non-number; the typeof test is there for the compiler's narrowing"
  },
  {
    file: "src/core/Constraints.ts",
    mutator: "ConditionalExpression",
    original: "typeof cns.task_type === \"string\"",
    replacement: "true",
    reason: "a list of strings includes no non-string; the typeof test is there for the compiler's narrowing"
  },
  {
    file: "src/core/Money.ts",
    mutator: "ArithmeticOperator",
    original: "pointAt - digits.length",
    reason: "pads more zeros than needed; they land after the point, where the trailing-zero trim removes them"
  },
  { file: "src/core/Money.ts", mutator: "EqualityOperator", original: "pointAt < 0", reason: "at 0 the branch prepends no zeros and sets pointAt to the 0 it already is" },
  { file: "src/core/Money.ts", mutator: "EqualityOperator", original: "pointAt > digits.length", reason: "when equal, the branch appends no zeros" },
  { file: "src/core/Did.ts", mutator: "BlockStatement", original: "{", line: "} catch {", reason: "an empty catch block returns undefined, as the original's does" },
  { file: "src/core/Did.ts", mutator: "StringLiteral", original: "\"Did\"", line: "Schema.brand", reason: "a brand's name only labels the type; no check and no message of Did uses it" },
  { file: "src/core/Did.ts", mutator: "BooleanLiteral", original: "false", line: "strict: false", reason: "strict only types the transform's functions; it does nothing at run time" },
  {
    file: "src/core/Did.ts",
    mutator: "MethodExpression",
    original: "Schema.filter",
    reason: "not a survivor: Did.ts then throws while loading (the Schema module is not a function), no test can run, and Stryker counts a run of 0 tests as survived"
  },
  {
    file: "src/core/Envelope.ts",
    mutator: "MethodExpression",
    original: "Schema.filter",
    reason: "not a survivor: Envelope.ts then throws while loading (the Schema module is not a function), no test can run, and Stryker counts a run of 0 tests as survived"
  },
  {
    file: "src/core/Envelope.ts",
    mutator: "ArrowFunction",
    original: "(max: number) =>",
    reason: "not a survivor: the Envelope schema then throws while loading (its members are undefined), no test can run, and Stryker counts a run of 0 tests as survived"
  },
  { file: "src/core/Envelope.ts", mutator: "ConditionalExpression", original: "u.length <= 64", reason: "UTC_TIMESTAMP matches at most 58 characters, so the 64-character bound never decides" },
  { file: "src/core/Envelope.ts", mutator: "EqualityOperator", original: "u.length <= 64", reason: "UTC_TIMESTAMP matches at most 58 characters, so the 64-character bound never decides" },
  {
    file: "src/core/Envelope.ts",
    mutator: "ConditionalExpression",
    original: "typeof u === \"string\" && u.length <= 64",
    reason: "isUtcTimestamp refuses non-strings and UTC_TIMESTAMP matches at most 58 characters"
  },
  {
    file: "src/core/Envelope.ts",
    mutator: "ConditionalExpression",
    original: "fast === undefined",
    replacement: "true",
    reason: "the fast canonical form and the generic one are the same bytes (a property test keeps them equal): only speed differs"
  },
  {
    file: "src/core/Envelope.ts",
    mutator: "ConditionalExpression",
    original: "o.created === undefined",
    reason: "an envelope's proof always has created: buildEnvelope writes it and validateEnvelope has required it to equal createdAt"
  },
  {
    file: "src/core/Envelope.ts",
    mutator: "StringLiteral",
    original: "\"not an envelope\"",
    reason: "unreachable: isEnvelope judges as the Schema does (a property test), so the Schema never decodes what isEnvelope refused"
  },
  {
    file: "src/core/Approval.ts",
    mutator: "ObjectLiteral",
    original: "{ created: toDateTimeSeconds(createdMs) }",
    reason: "signMessage's default is the same clock second; the two differ only if a second boundary passes between two clock reads (never under TestClock)"
  },
  {
    file: "src/core/HttpSignature.ts",
    mutator: "ConditionalExpression",
    original: "typeof u === \"number\"",
    replacement: "true",
    reason: "Number.isSafeInteger is false for every non-number; the typeof test is there for the compiler's narrowing"
  },
  {
    file: "src/core/Mandate.ts",
    mutator: "ConditionalExpression",
    original: "typeof u === \"number\"",
    replacement: "true",
    reason: "Number.isSafeInteger is false for every non-number; the typeof test is there for the compiler's narrowing"
  },
  {
    file: "src/core/Mandate.ts",
    mutator: "ConditionalExpression",
    original: "typeof p.kv !== \"number\"",
    replacement: "false",
    reason: "Number.isSafeInteger is false for every non-number; the typeof test is there for the compiler's narrowing"
  },
  {
    file: "src/core/Mandate.ts",
    mutator: "ConditionalExpression",
    original: "typeof p.kind !== \"string\"",
    replacement: "false",
    reason: "the list of kinds includes no non-string; the typeof test is there for the compiler's narrowing"
  },
  { file: "src/core/Mandate.ts", mutator: "UnaryOperator", original: "-1", line: "const d2 = d1 < 0", reason: "when the token has no dot, d1 < 0 refuses it whatever d2 is" },
  {
    file: "src/core/Mandate.ts",
    mutator: "ConditionalExpression",
    original: "d1 < 0",
    replacement: "false",
    line: "const d2 = d1 < 0",
    reason: "with no dot in the token, searching from d1 + 1 = 0 finds none either: d2 is -1 both ways"
  },
  {
    file: "src/core/Mandate.ts",
    mutator: "ConditionalExpression",
    original: "d1 < 0",
    replacement: "false",
    line: "if (d1 < 0 || d2 < 0",
    reason: "d2 is -1 whenever d1 is, so d2 < 0 refuses the token without a dot"
  },
  {
    file: "src/core/Mandate.ts",
    mutator: "LogicalOperator",
    original: "d1 < 0 || d2 < 0",
    reason: "with one dot d2 is -1, and the test for a third dot, searching from d2 + 1 = 0, finds the first: refused both ways"
  },
  {
    file: "src/core/Mandate.ts",
    mutator: "ConditionalExpression",
    original: "d2 < 0",
    replacement: "false",
    reason: "with one dot d2 is -1, and the test for a third dot, searching from d2 + 1 = 0, finds the first: refused both ways"
  },
  { file: "src/core/Mandate.ts", mutator: "EqualityOperator", original: "d2 < 0", reason: "d2 is never 0: a second dot, when found, comes after the first" },
  { file: "src/core/Mandate.ts", mutator: "EqualityOperator", original: "token.indexOf(\".\", d2 + 1) >= 0", reason: "a dot found after the second one is at index 2 or more, never 0" },
  {
    file: "src/core/Mandate.ts",
    mutator: "StringLiteral",
    original: "\"prf\"",
    line: "decodeBase64UrlJson(",
    reason: "prf is a nested token, parsed again as strict base64url: a non-ASCII character in it is refused whether or not it was decoded as UTF-8 first; only the time spent scanning it differs"
  },
  {
    file: "src/core/Mandate.ts",
    mutator: "ConditionalExpression",
    original: "typeof u === \"object\"",
    replacement: "true",
    line: "!Object.isFrozen(u)",
    reason: "a primitive or null is frozen by definition (Object.isFrozen is true for it), so deepFreeze skips it either way"
  },
  {
    file: "src/core/Mandate.ts",
    mutator: "LogicalOperator",
    original: "typeof u === \"object\"",
    replacement: "typeof u === \"object\" || u !== null",
    reason: "a primitive and null are frozen by definition (Object.isFrozen is true for both), so deepFreeze skips them either way"
  },
  {
    file: "src/core/Mandate.ts",
    mutator: "ConditionalExpression",
    original: "u !== null",
    replacement: "true",
    line: "!Object.isFrozen(u)",
    reason: "Object.isFrozen(null) is true, so deepFreeze skips null either way"
  },
  {
    file: "src/core/Mandate.ts",
    mutator: "LogicalOperator",
    original: "typeof u === \"object\"",
    replacement: "typeof u === \"object\" && u !== null || !Object.isFrozen(u)",
    reason: "walks a value already frozen once more and freezes nothing new (parsed JSON has no cycles): only time differs"
  },
  {
    file: "src/core/Mandate.ts",
    mutator: "ConditionalExpression",
    original: "parsed.structural === undefined",
    replacement: "true",
    reason: "recomputes chainProblem, a pure function of the parsed chain, on every call instead of once: only time differs"
  },
  {
    file: "src/core/Mandate.ts",
    mutator: "ConditionalExpression",
    original: "Either.isLeft(parsed)",
    replacement: "false",
    reason: "unreachable: sign checks everything parsing does before signing, so its own token always decodes (a defect otherwise)"
  }
]
