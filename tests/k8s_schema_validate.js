// Validates Kubernetes objects against the API's OpenAPI schemas, offline,
// with the kubernetes-models packages (@kubernetes-models/validate).
// Reads a JSON array of objects on stdin; prints a JSON array with one entry
// per object: {kind, name, error} (error null when valid). Exits 0 unless
// the input itself is unusable. The packages are found through NODE_PATH.
"use strict";

function modelFor(apiVersion, kind) {
  // "v1" is the core group (kubernetes-models/v1/...); "apps/v1" and
  // "batch/v1" are named groups (kubernetes-models/apps/v1/...).
  const module = require(`kubernetes-models/${apiVersion}/${kind}`);
  const model = module[kind];
  if (typeof model !== "function") throw new Error(`no model for ${apiVersion} ${kind}`);
  return model;
}

let input = "";
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", () => {
  const results = JSON.parse(input).map((object) => {
    const name = object.metadata && object.metadata.name;
    try {
      const Model = modelFor(object.apiVersion, object.kind);
      new Model(object).validate();
      return { kind: object.kind, name, error: null };
    } catch (e) {
      return { kind: object.kind, name, error: String(e.message || e) };
    }
  });
  process.stdout.write(JSON.stringify(results));
});
