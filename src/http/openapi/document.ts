/**
 * The OpenAPI 3.1 document of `/openapi/v1`, generated from the route descriptions and the very
 * zod schemas the routes validate and answer with, so that the document cannot drift from the
 * code. Named schemas (`.meta({ id })`) become `components.schemas`.
 */
import { z } from "zod";
import { ERROR_ENVELOPE, type RouteDoc, successEnvelope } from "./schemas.ts";
import { BODY_DEADLINE_MS } from "../middleware/body_size_limit.ts";

type JsonSchema = Record<string, unknown>;

/**
 * Statuses every route may answer (authenticated ones also 401, those that read a body also
 * 408).
 */
const COMMON_ERRORS = [429, 500, 503];

const ERROR_TEXT: Record<number, string> = {
  400: "Invalid request (the message says which rule)",
  401: "Invalid or missing API key",
  404: "Not found (another application's ids answer exactly like unknown ones)",
  408: `Request body not received in time (a body has ${BODY_DEADLINE_MS / 1000} s to arrive)`,
  409: "A request with the same Idempotency-Key is in progress",
  413: "Request body too large (over 256 KiB)",
  415: "Unsupported content type",
  422: "Outside the 24-hour window (only template messages can be sent), or an " +
    "Idempotency-Key already used for a different request",
  429: "Rate limit exceeded",
  500: "Internal server error, or Failed to send",
  503: "Shutting down: this instance is stopping (send the request again; another instance " +
    "or this one restarted answers it)",
};

const RATE_LIMIT_HEADERS: Record<string, string> = {
  "X-RateLimit-Limit": "Requests allowed per window",
  "X-RateLimit-Remaining": "Requests left in the current window (never negative)",
  "X-RateLimit-Reset": "Unix seconds at which the window ends",
  "RateLimit-Policy": 'IETF draft policy, e.g. `"default";q=120;w=60`',
  "RateLimit": 'IETF draft state, e.g. `"default";r=119;t=42`',
};

/** Options of {@linkcode buildOpenApiDocument}. */
export interface OpenApiDocumentOptions {
  /** The server address clients use, e.g. `https://parley.example.com`. */
  publicBaseUrl: string;
  /** Requests per minute, shown in the description. */
  rateLimitPerMinute: number;
}

/** Builds the document for `routes`. */
export function buildOpenApiDocument(
  routes: RouteDoc[],
  options: OpenApiDocumentOptions,
): JsonSchema {
  const components: Record<string, JsonSchema> = {};
  const schemaOf = (schema: z.ZodType, io: "input" | "output") => toSchema(schema, io, components);
  const errorSchema = schemaOf(ERROR_ENVELOPE, "output");
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const parameters = [
      ...parametersOf(route.params, "path", schemaOf),
      ...parametersOf(route.query, "query", schemaOf),
      ...parametersOf(route.headerParams, "header", schemaOf),
    ];
    const data = route.bare ? route.data : successEnvelope(route.data);
    const responses: Record<string, unknown> = {
      200: {
        description: "Success",
        headers: headersOf({ ...RATE_LIMIT_HEADERS, ...route.headers }),
        content: { "application/json": { schema: schemaOf(data, "output") } },
      },
    };
    const errors = [
      ...route.errors,
      ...COMMON_ERRORS,
      ...(route.public ? [] : [401]),
      ...(route.body ? [408] : []),
    ];
    for (const status of [...new Set(errors)].sort()) {
      const headers: Record<string, string> = { ...RATE_LIMIT_HEADERS };
      if (status === 401) headers["WWW-Authenticate"] = 'Always `Bearer realm="parley"`';
      if (status === 429) headers["Retry-After"] = "Whole seconds until the window resets";
      responses[status] = {
        description: ERROR_TEXT[status] ?? "Error",
        headers: headersOf(headers),
        content: { "application/json": { schema: errorSchema } },
      };
    }
    const operation: Record<string, unknown> = {
      summary: route.summary,
      operationId: operationId(route),
      ...(route.extension
        ? {
          description: "An extension of Parley beyond the product specification (CONTRACT §2.6).",
          "x-parley-extension": true,
        }
        : {}),
      ...(route.public ? { security: [] } : {}),
      ...(parameters.length > 0 ? { parameters } : {}),
      responses,
    };
    if (route.body) {
      const schema = schemaOf(route.body.schema, "input");
      operation.requestBody = {
        required: true,
        content: Object.fromEntries(route.body.mediaTypes.map((type) => [type, { schema }])),
      };
    }
    (paths[route.path] ??= {})[route.method] = operation;
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "Parley Open API",
      version: "1",
      description: "Read the application's conversations and reply as its bot. Every answer is " +
        '`{"code":0,"data":...}` or `{"code":<status>,"message":"..."}`. ' +
        `Rate limit: ${options.rateLimitPerMinute} requests per wall-clock minute, counted per ` +
        "`Authorization: Bearer` value, else (`X-Api-Key`, no key) per client IP.",
    },
    servers: [{ url: `${options.publicBaseUrl}/openapi/v1` }],
    security: [{ bearer: [] }, { apiKey: [] }],
    paths,
    components: {
      schemas: components,
      headers: Object.fromEntries(
        Object.entries(RATE_LIMIT_HEADERS).map(([name, description]) => [
          name,
          { description, schema: { type: "string" } },
        ]),
      ),
      securitySchemes: {
        bearer: { type: "http", scheme: "bearer", description: "`parley_` + 48 hex" },
        apiKey: { type: "apiKey", in: "header", name: "X-Api-Key" },
      },
    },
  };
}

/** One JSON Schema for `schema`, its named parts moved into `components`. */
function toSchema(
  schema: z.ZodType,
  io: "input" | "output",
  components: Record<string, JsonSchema>,
): JsonSchema {
  const generated = z.toJSONSchema(schema, {
    io,
    target: "draft-2020-12",
    unrepresentable: "any",
  }) as JsonSchema;
  const { $schema: _, $defs, ...rest } = generated;
  for (const [name, definition] of Object.entries(($defs ?? {}) as Record<string, JsonSchema>)) {
    components[name] = rewriteRefs(definition) as JsonSchema;
  }
  const id = (z.globalRegistry.get(schema) as { id?: string } | undefined)?.id;
  if (id) {
    // A named schema at the top comes back as a $ref to its own $defs entry, moved above.
    if (!(id in components)) components[id] = rewriteRefs(rest) as JsonSchema;
    return { $ref: `#/components/schemas/${id}` };
  }
  return rewriteRefs(rest) as JsonSchema;
}

function rewriteRefs(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(rewriteRefs);
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(
    Object.entries(value).map(([key, inner]) =>
      key === "$ref" && typeof inner === "string"
        ? [key, inner.replace(/^#\/\$defs\//, "#/components/schemas/")]
        : [key, rewriteRefs(inner)]
    ),
  );
}

function parametersOf(
  schema: z.ZodObject | undefined,
  location: "path" | "query" | "header",
  schemaOf: (schema: z.ZodType, io: "input" | "output") => JsonSchema,
): unknown[] {
  if (!schema) return [];
  return Object.entries(schema.shape).map(([name, field]) => {
    const { description, ...fieldSchema } = schemaOf(field as z.ZodType, "output");
    return {
      name,
      in: location,
      required: location === "path",
      ...(description ? { description } : {}),
      schema: fieldSchema,
    };
  });
}

/** Response headers: the rate-limit ones by reference to `components.headers`. */
function headersOf(headers: Record<string, string>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(headers).map(([name, description]) => [
      name,
      name in RATE_LIMIT_HEADERS
        ? { $ref: `#/components/headers/${name}` }
        : { description, schema: { type: "string" } },
    ]),
  );
}

function operationId(route: RouteDoc): string {
  const words = route.path.split("/").filter(Boolean).map((part) =>
    part.startsWith("{") ? "By" + capitalize(part.slice(1, -1)) : capitalize(part)
  );
  return route.method + words.join("");
}

function capitalize(word: string): string {
  return word.charAt(0).toUpperCase() + word.slice(1);
}
