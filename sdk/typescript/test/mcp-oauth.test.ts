// The official MCP TypeScript client signing in with OAuth, as MCP hosts
// do: against the real gateway binary with auth.oidc on a real OpenID
// provider (internal/cmd/testop: zitadel/oidc's example OP). The client
// has no token; the gateway's 401 names its RFC 9728 metadata, the client
// discovers the provider from it, runs authorization code + PKCE with a
// pre-registered client (the OP has no dynamic registration), the test
// plays the person at the provider's login form, and the tool call then
// runs once, as the tenant the token names.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, test } from "node:test";

import { Client as McpClient } from "@modelcontextprotocol/sdk/client/index.js";
import { UnauthorizedError, type OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";

import { mcpMeta, wire } from "../src/index.js";
import { buildGo, closedPort, localServer, startGateway, tempDir } from "./helpers.js";

const clientId = "mcp-host";
const clientSecret = "mcp-host-secret";
const redirectUrl = "http://127.0.0.1:1/oauth/callback";

const cleanups: Array<() => Promise<void> | void> = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

interface Provider {
  issuer: string;
  username: string;
  password: string;
}

/** Starts internal/cmd/testop for audience and reads the issuer it prints. */
async function startProvider(audience: string): Promise<Provider> {
  const binary = await buildGo("./internal/cmd/testop");
  const child = spawn(binary, ["-audience", audience, "-client-id", clientId, "-client-secret", clientSecret, "-redirect-url", redirectUrl], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  cleanups.push(() => void child.kill("SIGKILL"));
  process.on("exit", () => child.kill("SIGKILL"));
  const line = await new Promise<string>((resolveLine, reject) => {
    createInterface({ input: child.stdout! }).once("line", resolveLine);
    child.once("exit", (code) => reject(new Error(`testop exited with ${code}`)));
  });
  return JSON.parse(line) as Provider;
}

/**
 * An MCP host's OAuth client: pre-registered, keeping its tokens and PKCE
 * verifier in memory; "redirecting the user" is the test filling in the
 * provider's login form, which yields the authorization code.
 */
class HostAuth implements OAuthClientProvider {
  saved?: OAuthTokens;
  verifier = "";
  code = "";
  constructor(private readonly provider: Provider) {}
  get redirectUrl(): string {
    return redirectUrl;
  }
  get clientMetadata(): OAuthClientMetadata {
    return { client_name: "toolgateway test host", redirect_uris: [redirectUrl], scope: "openid org:acme", token_endpoint_auth_method: "client_secret_basic" };
  }
  clientInformation(): OAuthClientInformationMixed {
    return { client_id: clientId, client_secret: clientSecret };
  }
  tokens(): OAuthTokens | undefined {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens): void {
    this.saved = tokens;
  }
  saveCodeVerifier(verifier: string): void {
    this.verifier = verifier;
  }
  codeVerifier(): string {
    return this.verifier;
  }
  async redirectToAuthorization(url: URL): Promise<void> {
    this.code = await signInAtProvider(this.provider, url);
  }
}

/** Follows url to the provider's login form, signs the example user in and returns the code sent to the redirect URL. */
async function signInAtProvider(provider: Provider, url: URL): Promise<string> {
  let next = url.toString();
  let authRequestID = "";
  for (let hops = 0; hops < 10; hops++) {
    if (next.startsWith(redirectUrl)) {
      const code = new URL(next).searchParams.get("code");
      assert.ok(code, `no code in the redirect: ${next}`);
      return code;
    }
    let res: Response;
    if (!authRequestID && next.includes("/login/username")) {
      const page = await (await fetch(next)).text();
      authRequestID = /name="id" value="([^"]+)"/.exec(page)?.[1] ?? "";
      assert.ok(authRequestID, `no login form at the provider:\n${page}`);
      res = await fetch(new URL("/login/username", provider.issuer), {
        method: "POST",
        redirect: "manual",
        body: new URLSearchParams({ id: authRequestID, username: provider.username, password: provider.password }),
      });
    } else {
      res = await fetch(next, { redirect: "manual" });
    }
    const location = res.headers.get("location");
    assert.ok(location, `${next}: ${res.status} without a redirect: ${await res.text()}`);
    next = new URL(location, next).toString();
  }
  throw new Error("too many redirects at the provider");
}

test("the official MCP client signs in through the gateway's RFC 9728 metadata and calls a tool once as its tenant", async () => {
  const dir = tempDir("tsoauth-");
  const port = await closedPort();
  const gatewayURL = `http://127.0.0.1:${port}`;
  const provider = await startProvider(`${gatewayURL}/mcp`);
  const calls: Array<string | undefined> = [];
  const upstream = await localServer((req, _body, res) => {
    calls.push(req.headers[wire.HeaderTenant.toLowerCase()] as string | undefined);
    res.setHeader("Content-Type", "application/json");
    res.end(JSON.stringify({ id: "r-1" }));
  });
  cleanups.push(() => upstream.close());
  const gateway = await startGateway(
    dir,
    `store:
  path: ${join(dir, "gw.db")}
auth:
  oidc:
    issuer: ${provider.issuer}
    audience: ${gatewayURL}/mcp
    tenant_claim: org_id
tools:
  - name: provision
    input_schema:
      type: object
      properties:
        name: {type: string}
    http:
      url: ${upstream.url}/provision
`,
    `127.0.0.1:${port}`,
  );
  cleanups.push(() => gateway.kill());

  const auth = new HostAuth(provider);
  const endpoint = new URL(`${gateway.url}/mcp`);
  // First connection: no token, so the gateway's 401 starts the sign-in.
  await assert.rejects(new McpClient({ name: "host", version: "1.0.0" }).connect(new StreamableHTTPClientTransport(endpoint, { authProvider: auth })), UnauthorizedError);
  assert.ok(auth.code, "the client never sent the person to the provider");
  const transport = new StreamableHTTPClientTransport(endpoint, { authProvider: auth });
  await transport.finishAuth(auth.code);
  assert.ok(auth.saved?.access_token.split(".").length === 3, "the access token is not a JWT");

  const client = new McpClient({ name: "host", version: "1.0.0" });
  await client.connect(transport);
  try {
    const args = { name: "db-1" };
    for (let i = 0; i < 2; i++) {
      const result = (await client.callTool({ name: "provision", arguments: args, _meta: mcpMeta("oauth", 1, "provision", args) })) as { isError?: boolean };
      assert.ok(!result.isError, JSON.stringify(result));
    }
  } finally {
    await client.close();
  }
  assert.deepEqual(calls, ["acme"], "the tool ran once, as the token's tenant");
});

test("a chat host's identityless calls (no _meta identity, an OAuth token) run once per person and window", async () => {
  const dir = tempDir("tsidentityless-");
  const port = await closedPort();
  const gatewayURL = `http://127.0.0.1:${port}`;
  const provider = await startProvider(`${gatewayURL}/mcp`);
  const runs: string[] = [];
  const upstream = await localServer((_req, body, res) => {
    runs.push(body);
    setTimeout(() => {
      res.setHeader("Content-Type", "application/json");
      res.end(JSON.stringify({ refunded: true }));
    }, 200);
  });
  cleanups.push(() => upstream.close());
  // No mcp.identityless: with auth.oidc the default is fingerprint.
  const gateway = await startGateway(
    dir,
    `store:
  path: ${join(dir, "gw.db")}
auth:
  oidc:
    issuer: ${provider.issuer}
    audience: ${gatewayURL}/mcp
    tenant_claim: org_id
tools:
  - name: refund
    http:
      url: ${upstream.url}/refund
`,
    `127.0.0.1:${port}`,
  );
  cleanups.push(() => gateway.kill());

  const auth = new HostAuth(provider);
  const endpoint = new URL(`${gateway.url}/mcp`);
  await assert.rejects(new McpClient({ name: "host", version: "1.0.0" }).connect(new StreamableHTTPClientTransport(endpoint, { authProvider: auth })), UnauthorizedError);
  const transport = new StreamableHTTPClientTransport(endpoint, { authProvider: auth });
  await transport.finishAuth(auth.code);
  const client = new McpClient({ name: "host", version: "1.0.0" });
  await client.connect(transport);
  type Result = { isError?: boolean; content: Array<{ type: string; text?: string }>; _meta?: Record<string, unknown> };
  try {
    // Regenerate 5 times: the first runs, the others replay it, and say so.
    for (let i = 0; i < 5; i++) {
      const result = (await client.callTool({ name: "refund", arguments: { amount: 5 } })) as Result;
      assert.ok(!result.isError, JSON.stringify(result));
      assert.equal(result._meta?.[wire.MetaIdentity], wire.MetaIdentityFingerprint);
      assert.equal(result._meta?.[wire.MetaReplayed], i > 0);
      if (i > 0) assert.match(result.content[0]?.text ?? "", /^This exact call .* already ran at /);
    }
    // 8 at once (a connector retrying a dropped stream): one run.
    const concurrent = await Promise.all(Array.from({ length: 8 }, () => client.callTool({ name: "refund", arguments: { amount: 6 } }) as Promise<Result>));
    for (const result of concurrent) assert.ok(!result.isError, JSON.stringify(result));
  } finally {
    await client.close();
  }
  assert.deepEqual(runs, ['{"amount":5}', '{"amount":6}'], "each call ran once at the upstream");
});
