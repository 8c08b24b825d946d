// A client of the index service in another language: Node's built-in fetch (Node 18+), no packages.
// Usage: node service_client.mjs BASE_URL INDEX
// Prints one JSON object: what add_if_new answered for a text and for a copy of it, and near's matches.
const [base, index] = process.argv.slice(2);

async function call(operation, body) {
  const response = await fetch(`${base}/v1/indexes/${index}/${operation}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const answer = await response.json();
  if (!response.ok) {
    throw new Error(`${operation}: ${response.status} ${answer.error.code}: ${answer.error.message}`);
  }
  return answer;
}

const text = "Node workers call the same index: a story about the harbour, the ferries and the new bridge.";
const first = await call("add_if_new", { id: "node-1", text });
const copy = await call("add_if_new", { id: "node-2", text });
const near = await call("near", { text, k: 3 });
console.log(JSON.stringify({ first, copy, near }));
