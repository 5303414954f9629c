import { GatewayError, gatewayError, isProblemMediaType } from "./errors.js";
import { checkSessionId, checkStepIndex, checkToolName, derive } from "./key.js";
import {
  HeaderAuthorization,
  HeaderExecutionID,
  HeaderIdempotencyKey,
  HeaderPrefer,
  HeaderReplayed,
  HeaderRequestID,
  HeaderRetryAfter,
  HeaderSessionID,
  HeaderStepIndex,
  MediaTypeJSON,
  MediaTypeProblem,
} from "./wire.js";

/** The defaults of {@link ClientOptions}. */
export const Defaults = Object.freeze({
  /** Seconds the gateway may wait for a duplicate call still in flight (`Prefer: wait=10`). */
  preferWait: 10,
  /** HTTP attempts per call, the first included. */
  maxAttempts: 8,
  /** Milliseconds after the first attempt within which retries may start. */
  maxRetryTime: 30_000,
  /** Milliseconds: the first retry waits about this long... */
  initialBackoff: 100,
  /** ...and each further one twice as long, up to this. */
  maxBackoff: 5_000,
});

/** The longest `Prefer: wait` the gateway honours, in seconds. */
const maxPreferWait = 60;

/** Options of {@link Client}. Durations are milliseconds unless named otherwise. */
export interface ClientOptions {
  /** Sent as `Authorization: Bearer <token>` on every call. */
  token?: string;
  /**
   * Seconds to send as `Prefer: wait=N` (default 10, at most 60, 0 to send
   * none): when the same call is still running (another replica, a
   * duplicate), the gateway waits up to N seconds for its outcome and
   * answers it, instead of 409 at once. A call held for a person's
   * approval answers `approval_pending` at once all the same (the SDK
   * never sends the `approval` preference).
   */
  preferWait?: number;
  /** Bound on HTTP attempts per call, the first included (default 8). */
  maxAttempts?: number;
  /**
   * Bound on the time spent retrying (default 30 000 ms): no retry starts,
   * and no backoff is begun that would end, later than this after the first
   * attempt. With `maxAttempts` it makes a call to a gateway that is down end.
   */
  maxRetryTime?: number;
  /** First backoff (default 100 ms); doubles per retry up to `maxBackoff` (default 5 000 ms); jittered. */
  initialBackoff?: number;
  /** Cap of the backoff (default 5 000 ms). */
  maxBackoff?: number;
  /** Abort each HTTP attempt after this long (default: no limit of its own); a timed-out attempt is retried. */
  attemptTimeout?: number;
  /** The fetch to use (default: the global fetch). */
  fetch?: typeof globalThis.fetch;
}

/** Options of one {@link Session.call}. */
export interface CallOptions {
  /** Aborts the call, including its retries and the waits between them; the call rejects with `signal.reason`. */
  signal?: AbortSignal;
}

/** Throws unless token is a valid bearer token; the token itself stays out of the message (errors get logged). */
function checkToken(token: unknown): void {
  if (typeof token !== "string" || !/^[\x21-\x7e]*$/.test(token)) {
    throw new TypeError("toolgateway: the token must be a string of visible ASCII characters (0x21–0x7E)");
  }
}

/** Options of {@link Client.approve} and {@link Client.deny}. */
export interface DecisionOptions {
  /** The human's note, kept with the decision (a denial's `reason`; a deny needs one). */
  note?: string;
  /**
   * The deciding person's own bearer token (their OIDC access token at the
   * gateway's provider), sent instead of the client's. `approver: caller`
   * means a person: the gateway refuses a static agent token (403
   * `not_an_approver`), so an agent cannot approve its own calls.
   */
  token?: string;
  /** Aborts the request. */
  signal?: AbortSignal;
}

/** A tool as discovery publishes it (`GET /api/tools/v1`, the native form). */
export interface ToolDefinition {
  /** The tool's name, the `{tool}` of its URL. */
  name: string;
  /** What the tool does, for the model. */
  description: string;
  /** The JSON Schema of its arguments (`{"type": "object"}` when none is configured). */
  input_schema: Record<string, unknown>;
  /** True for a read-only tool, which needs no idempotency (absent otherwise). */
  read_only?: boolean;
}

/** A call's failure to reach the gateway (connection refused or reset, DNS, a body cut short) after every attempt. */
export class NetworkError extends Error {
  /** How many attempts were made. */
  readonly attempts: number;
  constructor(message: string, attempts: number, cause: unknown) {
    super(message, { cause });
    this.name = "NetworkError";
    this.attempts = attempts;
  }
}

/** The tool's outcome, from its execution or from a replay of it. */
export class Result {
  /** The HTTP status the tool answered (2xx–4xx). */
  readonly status: number;
  /** The tool's response body, as text. */
  readonly body: string;
  /** True when the gateway answered from its record of an earlier execution and the tool did not run. */
  readonly replayed: boolean;
  /** The execution's ULID (`Tool-Execution-Id`); a replay carries the id of the execution it replays. */
  readonly executionId: string;
  /** The idempotency key that was sent. */
  readonly key: string;
  /** The response's Content-Type. */
  readonly contentType: string;
  /** The gateway's `X-Request-Id` of the last attempt. */
  readonly requestId: string;
  /** How many HTTP requests the call took (1 without retries). */
  readonly attempts: number;

  constructor(init: Omit<Result, "json">) {
    this.status = init.status;
    this.body = init.body;
    this.replayed = init.replayed;
    this.executionId = init.executionId;
    this.key = init.key;
    this.contentType = init.contentType;
    this.requestId = init.requestId;
    this.attempts = init.attempts;
  }

  /** Parses the body as JSON. */
  json<T = unknown>(): T {
    return JSON.parse(this.body) as T;
  }
}

/**
 * Calls tools on one gateway. Safe for concurrent use.
 *
 *     const client = new Client("https://gateway.internal", { token });
 *     const result = await client.session("run-42").call(4, "provision", { name: "db" });
 */
export class Client {
  /** The gateway's root URL, without a trailing slash. */
  readonly baseUrl: string;
  readonly #token: string | undefined;
  readonly #preferWait: number;
  readonly #maxAttempts: number;
  readonly #maxRetryTime: number;
  readonly #initialBackoff: number;
  readonly #maxBackoff: number;
  readonly #attemptTimeout: number | undefined;
  readonly #fetch: typeof globalThis.fetch;

  /**
   * @param baseUrl the gateway's root URL, such as `https://gateway.internal`;
   *   calls go to `<baseUrl>/api/tools/v1/<tool>`. A URL that is not
   *   http(s), or has a query or fragment, throws at once.
   */
  constructor(baseUrl: string, options: ClientOptions = {}) {
    let url: URL;
    try {
      url = new URL(baseUrl);
    } catch (err) {
      throw new TypeError(`toolgateway: base URL ${JSON.stringify(baseUrl)} is not a URL`, { cause: err });
    }
    if ((url.protocol !== "http:" && url.protocol !== "https:") || url.search || url.hash || url.username || url.password) {
      throw new TypeError(
        `toolgateway: base URL ${JSON.stringify(baseUrl)} must be http(s)://host[:port][/path] without credentials, query or fragment`,
      );
    }
    this.baseUrl = url.href.replace(/\/+$/, "");
    if (options.token !== undefined) checkToken(options.token);
    this.#token = options.token;
    this.#preferWait = Math.min(Math.max(Math.ceil(nonNegative("preferWait", options.preferWait, Defaults.preferWait)), 0), maxPreferWait);
    this.#maxAttempts = Math.max(1, Math.floor(nonNegative("maxAttempts", options.maxAttempts, Defaults.maxAttempts)));
    this.#maxRetryTime = nonNegative("maxRetryTime", options.maxRetryTime, Defaults.maxRetryTime);
    this.#initialBackoff = Math.max(1, nonNegative("initialBackoff", options.initialBackoff, Defaults.initialBackoff));
    this.#maxBackoff = Math.max(this.#initialBackoff, nonNegative("maxBackoff", options.maxBackoff, Defaults.maxBackoff));
    this.#attemptTimeout = options.attemptTimeout === undefined ? undefined : nonNegative("attemptTimeout", options.attemptTimeout, 0);
    this.#fetch = options.fetch ?? globalThis.fetch;
  }

  /**
   * Returns a handle for the agent run identified by id: 1–256 visible
   * ASCII characters, no `:` (checked now; a bad id throws {@link InvalidInputError}).
   */
  session(id: string): Session {
    checkSessionId(id);
    return new Session(this, id);
  }

  /**
   * The tools the gateway publishes to this client's tenant (discovery,
   * `GET /api/tools/v1`), in name order. One request, no retries: it writes
   * nothing, and a caller that starts an agent wants to hear at once that
   * the gateway cannot be reached. A problem or 5xx answer throws a
   * {@link GatewayError}; a failed connection a {@link NetworkError}.
   */
  async tools(options: CallOptions = {}): Promise<ToolDefinition[]> {
    const url = `${this.baseUrl}/api/tools/v1`;
    const headers: Record<string, string> = { Accept: `${MediaTypeJSON}, ${MediaTypeProblem}` };
    if (this.#token) headers[HeaderAuthorization] = `Bearer ${this.#token}`;
    const text = await this.#once("GET", url, { headers }, options.signal);
    const listed = (JSON.parse(text) as { tools?: unknown }).tools;
    if (!Array.isArray(listed)) throw new TypeError(`toolgateway: GET ${url}: the answer has no tools list`);
    return listed as ToolDefinition[];
  }

  /**
   * Approves the approval `id` for the caller's own human: the answer to an
   * approval of a rule with `approver: caller`, sent once (no retries: a
   * second decision answers `approval_not_pending`) to `POST
   * /api/tools/v1/approvals/{id}/approve` with `options.token`, the
   * person's own token (this client's token when none is given: the
   * gateway refuses an agent's static token, 403 `not_an_approver`).
   * Nothing runs now: the agent's next call of the same step runs the call,
   * once. Throws a {@link GatewayError}: `not_an_approver` (no person's
   * token, or not one of the rule's approvers), `approval_not_yours` (an
   * operator decides it, or another tenant's), `approval_not_pending`
   * (decided already), `not_found`; a {@link NetworkError} when there is no
   * answer.
   */
  async approve(id: string, options: DecisionOptions = {}): Promise<void> {
    await this.#decide(id, "approve", options);
  }

  /** Denies the approval `id` as {@link Client.approve} approves it; the call then throws `approval_denied` with the note as its `reason`. */
  async deny(id: string, options: DecisionOptions = {}): Promise<void> {
    await this.#decide(id, "deny", options);
  }

  /**
   * One request without retries (discovery, an approval's decision): the
   * answer's text, a {@link NetworkError} when there is none, a
   * {@link GatewayError} for an answer that is not 2xx.
   */
  async #once(method: string, url: string, init: { headers: Record<string, string>; body?: string }, signal?: AbortSignal): Promise<string> {
    let response: Response;
    let text: string;
    try {
      response = await this.#fetch(url, { ...init, method, signal: signal ?? null });
      text = await response.text();
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      const reason = err instanceof Error ? describeNetworkError(err) : String(err);
      throw new NetworkError(`toolgateway: ${method} ${url}: ${reason}`, 1, err);
    }
    if (!response.ok) {
      throw gatewayError({
        status: response.status,
        statusText: response.statusText,
        contentType: response.headers.get("Content-Type"),
        body: text,
        retryAfter: parseRetryAfter(response.headers.get(HeaderRetryAfter)),
        requestId: response.headers.get(HeaderRequestID) ?? undefined,
      });
    }
    return text;
  }

  async #decide(id: string, decision: "approve" | "deny", options: DecisionOptions): Promise<void> {
    if (typeof id !== "string" || id === "") throw new TypeError(`toolgateway: ${decision}: the approval id must be a non-empty string`);
    const url = `${this.baseUrl}/api/tools/v1/approvals/${encodeURIComponent(id)}/${decision}`;
    const headers: Record<string, string> = { "Content-Type": MediaTypeJSON, Accept: `${MediaTypeJSON}, ${MediaTypeProblem}` };
    const token = options.token ?? this.#token;
    if (options.token !== undefined) checkToken(options.token);
    if (token) headers[HeaderAuthorization] = `Bearer ${token}`;
    const body = JSON.stringify(options.note ? { note: options.note } : {});
    await this.#once("POST", url, { headers, body }, options.signal);
  }

  /** @internal One call with its retries; Session.call checks its inputs first. */
  async _call(sessionId: string, step: number, tool: string, args: unknown, options: CallOptions): Promise<Result> {
    const { key, canonical } = derive(sessionId, step, tool, args, { allowUnsafeIntegers: false });
    const url = `${this.baseUrl}/api/tools/v1/${tool}`;
    const headers: Record<string, string> = {
      "Content-Type": MediaTypeJSON,
      Accept: `${MediaTypeJSON}, ${MediaTypeProblem}`,
      [HeaderIdempotencyKey]: key,
      [HeaderSessionID]: sessionId,
      [HeaderStepIndex]: String(step),
    };
    if (this.#token) headers[HeaderAuthorization] = `Bearer ${this.#token}`;
    // A call held for a person's approval still answers at once: without
    // the "approval" preference the gateway waits only for a call in flight.
    if (this.#preferWait > 0) headers[HeaderPrefer] = `wait=${this.#preferWait}`;
    // Building the request checks the URL and the header values (all
    // checked already, the token in the constructor): a failure here is
    // permanent and is thrown at once, before anything is sent.
    try {
      new Request(url, { method: "POST", headers, body: canonical });
    } catch (err) {
      throw new TypeError(`toolgateway: cannot build the request to ${url}: ${(err as Error).message}`, { cause: err });
    }

    const signal = options.signal;
    const started = Date.now();
    for (let attempt = 1; ; attempt++) {
      signal?.throwIfAborted();
      let failure: GatewayError | NetworkError;
      let wait: number;
      try {
        const answer = await this.#attempt(url, headers, canonical, signal);
        if (!(answer instanceof GatewayError)) {
          return new Result({ ...answer, key, attempts: attempt });
        }
        if (!answer.retriedByClient) throw answer;
        failure = answer;
        wait = answer.retryAfter !== undefined && answer.retryAfter > 0 ? answer.retryAfter * 1000 : this.#backoff(attempt - 1);
      } catch (err) {
        if (err instanceof GatewayError) throw err;
        if (signal?.aborted) throw signal.reason;
        const reason = err instanceof Error ? describeNetworkError(err) : String(err);
        failure = new NetworkError(
          `toolgateway: POST ${url}: ${reason} (attempt ${attempt})`,
          attempt,
          err,
        );
        wait = this.#backoff(attempt - 1);
      }
      if (attempt >= this.#maxAttempts || Date.now() + wait - started > this.#maxRetryTime) {
        throw failure;
      }
      await sleep(wait, signal);
    }
  }

  /** One HTTP attempt: the outcome, a GatewayError for a problem or 5xx answer; throws on transport failures. */
  async #attempt(
    url: string,
    headers: Record<string, string>,
    body: string,
    signal: AbortSignal | undefined,
  ): Promise<Omit<Result, "key" | "attempts" | "json"> | GatewayError> {
    const controller = new AbortController();
    const abort = () => controller.abort(signal?.reason);
    signal?.addEventListener("abort", abort, { once: true });
    const timer =
      this.#attemptTimeout === undefined
        ? undefined
        : setTimeout(() => controller.abort(new Error(`attempt timed out after ${this.#attemptTimeout} ms`)), this.#attemptTimeout);
    try {
      const response = await this.#fetch(url, { method: "POST", headers, body, signal: controller.signal });
      // Reading the body can fail like the connection (cut short): that
      // throws, and is retried like any network error.
      const text = await response.text();
      const contentType = response.headers.get("Content-Type") ?? "";
      const requestId = response.headers.get(HeaderRequestID) ?? "";
      if (response.status >= 500 || (response.status >= 400 && isProblemMediaType(contentType))) {
        return gatewayError({
          status: response.status,
          statusText: response.statusText,
          contentType,
          body: text,
          retryAfter: parseRetryAfter(response.headers.get(HeaderRetryAfter)),
          requestId: requestId || undefined,
        });
      }
      return {
        status: response.status,
        body: text,
        replayed: response.headers.get(HeaderReplayed) === "true",
        executionId: response.headers.get(HeaderExecutionID) ?? "",
        contentType,
        requestId,
      };
    } catch (err) {
      if (controller.signal.aborted && !signal?.aborted) {
        throw controller.signal.reason;
      }
      throw err;
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", abort);
    }
  }

  /**
   * The delay before retry number retry (0 for the first): the ceiling
   * initial·2^retry capped at max, and a delay drawn from its upper half
   * ("equal jitter"), so that many agents retrying at once spread out and
   * no delay collapses to zero.
   */
  #backoff(retry: number): number {
    const ceiling = Math.min(this.#initialBackoff * 2 ** Math.min(retry, 52), this.#maxBackoff);
    return ceiling / 2 + Math.random() * (ceiling / 2);
  }
}

/** One agent run: the scope of its step indices. */
export class Session {
  readonly #client: Client;
  /** The session id. */
  readonly id: string;

  /** @internal Use {@link Client.session}. */
  constructor(client: Client, id: string) {
    this.#client = client;
    this.id = id;
  }

  /**
   * Runs tool with args as step `step` of this session and returns its
   * outcome. The RFC 8785 text of args is sent, under the key derived from
   * it. Invalid inputs throw {@link InvalidInputError} before anything is
   * sent: a bad step or tool name; arguments that are not a JSON object or
   * hold NaN, ±Infinity, or an integral number beyond ±(2^53−1) (`2 ** 53`,
   * `1e21`: JavaScript cannot tell such a number from a large id that
   * already lost digits, so send such ids as strings), a BigInt, a function,
   * a Map or class instance without toJSON, a lone surrogate or a cycle.
   *
   * Retries with the same key on network errors, 409 request_in_progress
   * (after its Retry-After), 502, 503 and 504, with capped exponential
   * backoff and jitter, until `maxAttempts` or `maxRetryTime` is reached or
   * the signal aborts. Any other problem or 5xx answer throws a
   * {@link GatewayError} at once; a tool's own 2xx–4xx answer is a
   * {@link Result}.
   */
  call(step: number | bigint, tool: string, args: unknown, options: CallOptions = {}): Promise<Result> {
    try {
      const index = checkStepIndex(step);
      checkToolName(tool);
      return this.#client._call(this.id, index, tool, args, options);
    } catch (err) {
      return Promise.reject(err);
    }
  }
}

/** Reads Retry-After as delay-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null): number | undefined {
  if (!value) return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  const date = Date.parse(value);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, Math.ceil((date - Date.now()) / 1000));
}

function nonNegative(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
    throw new TypeError(`toolgateway: option ${name} must be a finite number ≥ 0, not ${String(value)}`);
  }
  return value;
}

function describeNetworkError(err: Error): string {
  // fetch reports "fetch failed" and puts the reason (ECONNREFUSED...) in cause.
  const cause = err.cause as { code?: unknown; message?: unknown } | undefined;
  const detail = typeof cause?.code === "string" ? cause.code : typeof cause?.message === "string" ? cause.message : "";
  return detail ? `${err.message} (${detail})` : err.message;
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

