// The agent bench/shipped.ts serves with `mesh agent`: the JSON echo every peer in that suite answers too.
export default { name: "echo", handler: ({ message }) => message }
