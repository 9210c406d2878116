/**
 * Open API fixtures for integration tests: an application with an API key, a visitor with an
 * open conversation (made through the real widget routes), and a small client for `/openapi/v1`.
 */
import assert from "node:assert/strict";
import type { Sql } from "../../src/db/client.ts";
import { insertApplication } from "../../src/db/applications.ts";
import { insertApiKey } from "../../src/db/api_keys.ts";
import { newApiKey, sha256Bytes } from "../../src/crypto/tokens.ts";

/** An application that has one active API key. */
export interface KeyedApp {
  appId: number;
  publicId: string;
  key: string;
  keyId: number;
}

/** Creates an application and a key for it, straight in the database. */
export async function createKeyedApp(sql: Sql, name = "Acme"): Promise<KeyedApp> {
  const app = await insertApplication(sql, name);
  const key = newApiKey();
  const keyId = await insertApiKey(sql, {
    appId: app.id,
    name: "test",
    keyHash: sha256Bytes(key),
    prefix: key.slice(7, 15),
  });
  assert.ok(keyId !== null);
  return { appId: app.id, publicId: app.public_id, key, keyId };
}

/** A visitor of an application with an open conversation. */
export interface VisitorChat {
  token: string;
  clientId: number;
  chatId: number;
  messageId: number;
}

/** Creates a visitor through the widget and has it send `content` (opening a conversation). */
export async function createVisitorChat(
  baseUrl: string,
  publicId: string,
  content = "Hello",
): Promise<VisitorChat> {
  const created = await fetch(`${baseUrl}/api/v1/widget/${publicId}/visitors`, { method: "POST" });
  assert.equal(created.status, 200);
  const { visitor_token: token, client_id: clientId } = (await created.json()).data;
  const sent = await fetch(`${baseUrl}/api/v1/widget/messages`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ content }),
  });
  assert.equal(sent.status, 200);
  const { chat_id: chatId, message_id: messageId } = (await sent.json()).data;
  return { token, clientId, chatId, messageId };
}

/** What {@linkcode apiCall} answers. */
export interface ApiAnswer {
  status: number;
  headers: Headers;
  // deno-lint-ignore no-explicit-any
  json: any;
}

/** Options of {@linkcode apiCall}. */
export interface ApiCallOptions {
  method?: string;
  /** Sent as `Authorization: Bearer <key>`. */
  key?: string;
  /** Extra request headers. */
  headers?: Record<string, string>;
  /** A JSON body (sets the content type). */
  json?: unknown;
  /** A form body (sets the content type). */
  form?: Record<string, string>;
  /** A raw body, with `headers` giving its type. */
  raw?: string;
}

/** Calls `/openapi/v1{path}` and reads the JSON answer. */
export async function apiCall(
  baseUrl: string,
  path: string,
  options: ApiCallOptions = {},
): Promise<ApiAnswer> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.key) headers.authorization = `Bearer ${options.key}`;
  let body: string | undefined = options.raw;
  if (options.json !== undefined) {
    body = JSON.stringify(options.json);
    headers["content-type"] = "application/json";
  }
  if (options.form !== undefined) {
    body = new URLSearchParams(options.form).toString();
    headers["content-type"] = "application/x-www-form-urlencoded";
  }
  const res = await fetch(`${baseUrl}/openapi/v1${path}`, {
    method: options.method ?? (body === undefined ? "GET" : "POST"),
    headers,
    body,
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new Error(`Not JSON (${res.status}): ${text.slice(0, 200)}`);
  }
  return { status: res.status, headers: res.headers, json };
}
