// Every ```ts block of the docs that show the TypeScript SDK is type-checked
// against the package's declarations, as a reader's file would be: each
// block is one module importing "@toolgateway/client" (the package's own
// name, resolved to its built dist/src/index.d.ts), so a renamed or retyped
// API, or a wrong snippet, fails here.
//
// A block may use, without declaring them, the package's exports (the docs
// show the import once) and the few values a snippet stands for, declared
// in `freeNames` below with their types. Any other undeclared name fails.
// The runtimes installed as dev dependencies (LangChain.js, LangGraph.js,
// the AI SDK, the OpenAI Agents SDK, zod) are checked with their own
// declarations; the imports of those that are not (Temporal) are typed
// `any`: their part of a snippet is not checked, only the SDK's part is.
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import ts from "typescript";

import * as sdk from "../src/index.js";
import { repoRoot } from "./helpers.js";

/** The Markdown files whose ```ts blocks are checked. */
const docs = [
  "README.md",
  "docs/sdk-typescript.md",
  "docs/keys.md",
  "docs/runtimes.md",
  "docs/runtimes-ai-sdk.md",
  "docs/runtimes-openai-agents.md",
  "sdk/typescript/README.md",
];

/** A block right after this comment is not code (a list of signatures); it must say why. */
const skipMarker = /<!-- not type-checked: [^>]+ -->\s*$/;

/** What a snippet may use without declaring it: the values it stands for. */
const freeNames: Record<string, string> = {
  checkpoint: "declare const checkpoint: { sessionId: string; step: number }; // the agent's checkpoint",
  token: "declare const token: string;",
  client: "declare const client: Client; // new Client(...), made once",
  gateway: "declare const gateway: Client; // keys.md's name for the client",
  sessionId: "declare const sessionId: string;",
  step: "declare const step: number;",
  args: "declare const args: { name: string; region: string; cpus: number };",
  session: "declare const session: Session;",
  items: "declare const items: unknown[];",
  callId: "declare const callId: string;",
  llm: 'declare const llm: import("@langchain/core/language_models/chat_models").BaseChatModel; // your chat model',
  checkpointer: 'declare const checkpointer: import("@langchain/langgraph").BaseCheckpointSaver; // e.g. SqliteSaver',
  chatId: "declare const chatId: string; // the id the app stores the conversation under",
  model: 'declare const model: Exclude<import("ai").LanguageModel, string>; // your provider\'s model',
  messages: 'declare const messages: import("ai").ModelMessage[]; // the stored conversation',
};

/**
 * The runtimes' packages not installed here: declared as untyped modules
 * (every import is `any`).
 */
const untypedModules: Record<string, string> = {
  "@temporalio/activity": "",
};

interface Block {
  doc: string;
  line: number; // of the first code line, 1-based
  code: string;
}

function tsBlocks(): { blocks: Block[]; skipped: Block[] } {
  const blocks: Block[] = [];
  const skipped: Block[] = [];
  for (const doc of docs) {
    const text = readFileSync(join(repoRoot, doc), "utf8");
    for (const match of text.matchAll(/^```ts\n([\s\S]*?)^```$/gm)) {
      const before = text.slice(0, match.index);
      const block = { doc, line: before.split("\n").length + 1, code: match[1]! };
      (skipMarker.test(before) ? skipped : blocks).push(block);
    }
  }
  return { blocks, skipped };
}

const options: ts.CompilerOptions = {
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  lib: ["lib.es2022.d.ts"],
  types: ["node"],
  strict: true,
  noUncheckedIndexedAccess: true,
  skipLibCheck: true,
  noEmit: true,
};

const packageDir = join(repoRoot, "sdk/typescript");

/** Type-checks the blocks, each with its prelude, and returns the diagnostics per block. */
function check(dir: string, blocks: Block[], preludes: string[], old?: ts.Program): { program: ts.Program; diagnostics: ts.Diagnostic[][] } {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const ambient = join(dir, "untyped-runtimes.d.ts");
  const declarations = Object.entries(untypedModules).map(([name, body]) => `declare module ${JSON.stringify(name)}${body ? " " + body : ";"}`);
  writeFileSync(ambient, declarations.join("\n") + "\n");
  const files = blocks.map((block, i) => {
    const file = join(dir, `block${i}.ts`);
    // The prelude goes on the block's first line, so line numbers stay the block's.
    writeFileSync(file, `${preludes[i] ?? ""}${block.code}\nexport {};\n`);
    return file;
  });
  // The second pass reuses the first's parsed declarations (node's, the
  // MCP SDK's), which are most of the work.
  const program = ts.createProgram([ambient, ...files], options, undefined, old);
  const diagnostics = files.map((file) => {
    const source = program.getSourceFile(file);
    assert.ok(source, `${file} was not compiled`);
    return [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)];
  });
  return { program, diagnostics };
}

function describe(block: Block, diagnostics: readonly ts.Diagnostic[]): string {
  return diagnostics
    .map((d) => {
      const { line } = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : { line: 0 };
      return `${block.doc}:${block.line + line}: TS${d.code} ${ts.flattenDiagnosticMessageText(d.messageText, "\n")}`;
    })
    .join("\n");
}

test("every ```ts block of the docs type-checks against the package", () => {
  const { blocks, skipped } = tsBlocks();
  // The docs hold at least these: the README's, sdk-typescript.md's five,
  // keys.md's three recipes, the package README's.
  assert.ok(blocks.length >= 9, `only ${blocks.length} ts blocks found`);
  // The API list of sdk-typescript.md.
  assert.ok(skipped.length <= 1, `${skipped.length} blocks are marked not type-checked`);
  // The snippet files live in the package (under the ignored dist/), so
  // "@toolgateway/client" resolves to the package itself by its name.
  const dir = join(packageDir, "dist", "doc-snippets");
  const exported = new Set(Object.keys(sdk));

  // First pass: which names does each block use without declaring them?
  const first = check(dir, blocks, []);
  const preludes = first.diagnostics.map((diagnostics, i) => {
    const missing = new Set<string>();
    for (const d of diagnostics) {
      // Cannot find name 'x' (2304, 2552: "Did you mean"), or no value for the shorthand property 'x' (18004).
      if (d.code !== 2304 && d.code !== 2552 && d.code !== 18004) continue;
      const name = /'([^']+)'/.exec(ts.flattenDiagnosticMessageText(d.messageText, "\n"))?.[1];
      if (name) missing.add(name);
    }
    const imports = [...missing].filter((name) => exported.has(name));
    const declared = [...missing].filter((name) => !exported.has(name));
    const unknown = declared.filter((name) => !(name in freeNames));
    assert.deepEqual(unknown, [], `${blocks[i]!.doc}:${blocks[i]!.line}: the snippet uses undeclared ${unknown.join(", ")}`);
    // The free names' types name the package's classes without importing
    // them, so they cannot clash with the block's own imports.
    return (
      (imports.length ? `import { ${imports.join(", ")} } from "@toolgateway/client"; ` : "") +
      declared
        .map((name) => freeNames[name]!.replace(/\s*\/\/.*$/, "").replace(/\b(Client|Session)\b/g, 'import("@toolgateway/client").$1'))
        .join(" ")
    );
  });

  // Second pass: with the preludes, nothing may be wrong.
  const second = check(dir, blocks, preludes, first.program);
  const errors = second.diagnostics.map((diagnostics, i) => describe(blocks[i]!, diagnostics)).filter(Boolean);
  assert.equal(errors.join("\n"), "", "doc snippets that do not type-check");
  rmSync(dir, { recursive: true, force: true });
});

test("the check catches a wrong snippet", () => {
  // The same machinery on snippets known to be wrong: a renamed export, a
  // wrong argument type, a name nobody declares.
  const dir = join(packageDir, "dist", "doc-snippets-wrong");
  const wrong: Block[] = [
    { doc: "wrong", line: 1, code: 'import { temporalStepIndex } from "@toolgateway/client";\n' },
    { doc: "wrong", line: 1, code: 'import { Client } from "@toolgateway/client";\nnew Client("http://127.0.0.1:8080").session(42);\n' },
    { doc: "wrong", line: 1, code: 'import { langgraphStep } from "@toolgateway/client";\nlanggraphStep([], 7);\n' },
  ];
  const results = check(dir, wrong, []).diagnostics;
  rmSync(dir, { recursive: true, force: true });
  for (const [i, diagnostics] of results.entries()) {
    assert.ok(diagnostics.length > 0, `wrong snippet ${i} passed the check: ${wrong[i]!.code}`);
  }
});
