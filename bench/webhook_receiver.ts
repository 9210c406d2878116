/**
 * The benchmark's webhook receiver, run as its own process (so that its TLS and parsing do not
 * slow the load generator, nor the other way round): a local HTTPS server with a self-signed
 * certificate that answers 204 at once and records, for every delivery, how long after its
 * message was committed it arrived (from the message's `created_at`, taken inside the committing
 * statement). `GET /stats` answers what it recorded.
 *
 * Run: `deno run -A bench/webhook_receiver.ts <port> <certificate file> <key file>`.
 */

/** What `GET /stats` answers. */
export interface ReceiverStats {
  /** Arrival time (ms, epoch) and latency after commit (ms) of every delivery. */
  deliveries: { at: number; latencyMs: number }[];
}

if (import.meta.main) {
  const [port, certFile, keyFile] = Deno.args;
  const deliveries: ReceiverStats["deliveries"] = [];
  Deno.serve({
    port: Number(port),
    hostname: "127.0.0.1",
    cert: await Deno.readTextFile(certFile),
    key: await Deno.readTextFile(keyFile),
    onListen: () => {},
  }, async (request) => {
    if (request.method === "GET") return Response.json({ deliveries } satisfies ReceiverStats);
    const event = await request.json();
    const createdAt = Date.parse(event.data?.message?.created_at ?? event.created_at);
    const now = Date.now();
    deliveries.push({ at: now, latencyMs: now - createdAt });
    return new Response(null, { status: 204 });
  });
}
