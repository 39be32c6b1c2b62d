// Validates Amazon States Language definitions with asl-validator's API, in one
// Node process (its CLI takes about a second per file to start).
// stdin: {"label": definition, ...}; stdout: {"label": null | "errors text", ...}.
// Exit 0 when every definition is valid, 1 otherwise, 2 on a program error.
"use strict";
const path = require("path");

const validatorPath = path.resolve(process.env.ASL_VALIDATOR_MODULE || "node_modules/asl-validator");
const aslValidator = require(validatorPath).default ?? require(validatorPath);

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", () => {
  let definitions;
  try {
    definitions = JSON.parse(input);
  } catch (error) {
    console.error(`validate-asl: stdin is not JSON: ${error.message}`);
    process.exit(2);
  }
  const results = {};
  let invalid = 0;
  for (const [label, definition] of Object.entries(definitions)) {
    const result = aslValidator(definition, { checkArn: true, checkPaths: true });
    results[label] = result.isValid ? null : result.errorsText("\n");
    if (!result.isValid) invalid += 1;
  }
  process.stdout.write(JSON.stringify(results));
  process.exit(invalid ? 1 : 0);
});
