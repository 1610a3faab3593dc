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
  }
]
