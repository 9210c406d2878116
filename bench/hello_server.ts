/**
 * The baseline of the benchmark: a Hono hello-world route on Deno.serve, the most this
 * machine serves through the same framework with no work behind it.
 */
import { Hono } from "hono";

const app = new Hono().get("/", (c) => c.text("Hello, world"));
const port = Number(Deno.args[0] ?? 8090);
Deno.serve({ port, hostname: "127.0.0.1", onListen: () => console.log("listening") }, app.fetch);
