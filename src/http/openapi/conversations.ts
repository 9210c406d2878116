/**
 * `GET /conversations`, `GET /conversations/{id}` and `GET /conversations/{id}/messages` of the
 * Open API: reads of the caller's own application, straight from the database. Another
 * application's conversation is answered exactly like one that does not exist.
 */
import { Hono } from "hono";
import { z } from "zod";
import type { Sql } from "../../db/client.ts";
import { findConversation, listConversations } from "../../db/conversations.ts";
import { listMessages } from "../../db/messages.ts";
import { AppError } from "../../domain/app_error.ts";
import { type Conversation, CONVERSATION_STATUSES } from "../../domain/conversation.ts";
import { ok, okRaw } from "../envelope.ts";
import { filterParam, HISTORY_QUERY, idParam, limitParam } from "../query_params.ts";
import type { ApiKeyAuthVariables } from "../middleware/api_key_auth.ts";
import { decodeCursor, encodeCursor } from "./cursor.ts";
import type { ConversationListCache } from "../../cache/conversation_lists.ts";
import { CONVERSATION, MESSAGE, type RouteDoc } from "./schemas.ts";

/** A page of a listing, ready to send. */
interface RenderedPage {
  /** The JSON of the page's conversations. */
  data: string;
  /** The `Link` header to the next page, if there is one. */
  link: string | null;
}

/** What the conversation routes need. */
export interface ConversationRoutesDeps {
  sql: Sql;
  /** First pages of the listings, kept in memory. */
  listings: ConversationListCache;
  /** Where clients reach Parley, for `Link` headers. */
  publicBaseUrl: string;
}

const LIST_QUERY = z.object({
  status: filterParam(
    CONVERSATION_STATUSES,
    "Only conversations with this status; omit for all",
  ),
  limit: limitParam(20, 1, 50),
  before: z.string().optional().meta({
    description: "The opaque cursor of the next page, as given in the previous page's Link header",
  }),
});

const CONVERSATION_PARAMS = z.object({ id: idParam("The conversation id") });

/** How these routes appear in the OpenAPI document. */
export const CONVERSATION_ROUTE_DOCS: RouteDoc[] = [
  {
    method: "get",
    path: "/conversations",
    summary: "Recent conversations of the application, newest activity first",
    query: LIST_QUERY,
    data: z.array(CONVERSATION),
    headers: { Link: 'The next page, `<url>; rel="next"`, when more conversations exist' },
    errors: [400],
  },
  {
    method: "get",
    path: "/conversations/{id}",
    summary: "One conversation",
    params: CONVERSATION_PARAMS,
    data: CONVERSATION,
    errors: [404],
  },
  {
    method: "get",
    path: "/conversations/{id}/messages",
    extension: true,
    summary: "The latest messages of a conversation, oldest first",
    params: CONVERSATION_PARAMS,
    query: HISTORY_QUERY,
    data: z.array(MESSAGE),
    errors: [404],
  },
];

/** Routes under `/openapi/v1/conversations`. */
export function conversationRoutes(
  deps: ConversationRoutesDeps,
): Hono<{ Variables: ApiKeyAuthVariables }> {
  const { sql, listings, publicBaseUrl } = deps;
  const routes = new Hono<{ Variables: ApiKeyAuthVariables }>();

  routes.get("/", async (c) => {
    const query = LIST_QUERY.safeParse(c.req.query());
    if (!query.success) {
      const field = query.error.issues[0].path[0];
      if (field === "status") {
        throw new AppError(400, `status must be one of: ${CONVERSATION_STATUSES.join(", ")}`);
      }
      throw new AppError(400, "before is not a valid cursor");
    }
    const { status, limit, before } = query.data;
    const after = before === undefined ? undefined : decodeCursor(before);
    if (after === null) throw new AppError(400, "before is not a valid cursor");
    const { appId } = c.get("caller");
    // The first page comes from memory (up to 51 rows); later pages from the database.
    const rows = after === undefined
      ? await listings.get(appId, status)
      : await listConversations(sql, appId, { status, limit: limit + 1, after });
    const page = after === undefined
      ? renderedPage(rows, limit, status)
      : renderPage(rows, limit, status);
    if (page.link) c.header("Link", page.link);
    return okRaw(c, page.data);
  });

  /** Pages of listings served from memory, rendered once per rows array and limit. */
  const rendered = new WeakMap<Conversation[], Map<number, RenderedPage>>();

  function renderedPage(rows: Conversation[], limit: number, status?: string): RenderedPage {
    let byLimit = rendered.get(rows);
    if (!byLimit) rendered.set(rows, byLimit = new Map());
    let page = byLimit.get(limit);
    if (!page) byLimit.set(limit, page = renderPage(rows, limit, status));
    return page;
  }

  /** The JSON of the first `limit` rows, and the Link to the next page when there are more. */
  function renderPage(rows: Conversation[], limit: number, status?: string): RenderedPage {
    const page = rows.slice(0, limit);
    let link: string | null = null;
    if (rows.length > limit) {
      const last = page[limit - 1];
      const next = new URLSearchParams();
      if (status) next.set("status", status);
      next.set("limit", String(limit));
      next.set("before", encodeCursor({ lastMessageAt: last.last_message_at, id: last.id }));
      link = `<${publicBaseUrl}/openapi/v1/conversations?${next}>; rel="next"`;
    }
    return { data: JSON.stringify(page), link };
  }

  routes.get("/:id", async (c) => {
    const conversation = await ownConversation(c.get("caller").appId, c.req.param("id"));
    return ok(c, conversation);
  });

  routes.get("/:id/messages", async (c) => {
    const { appId } = c.get("caller");
    const conversation = await ownConversation(appId, c.req.param("id"));
    // Lenient by design: every value parses (a bad limit means the default, a bad before none).
    const { limit, before } = HISTORY_QUERY.parse(c.req.query());
    const messages = await listMessages(sql, appId, conversation.id, {
      limit,
      before,
      includeInternal: true,
    });
    return ok(c, messages);
  });

  async function ownConversation(appId: number, idText: string) {
    const params = CONVERSATION_PARAMS.safeParse({ id: idText });
    const conversation = params.success ? await findConversation(sql, appId, params.data.id) : null;
    if (!conversation) throw new AppError(404, "Conversation not found");
    return conversation;
  }

  return routes;
}
