/**
 * The benchmark's webhook receiver: a local HTTPS server with a self-signed certificate that
 * answers 200 at once and records, for every delivery, how long after its message was committed
 * it arrived (from the message's `created_at`, taken inside the committing statement).
 */
import { selfSignedCertificate } from "../tests/support/tls.ts";

/** A running receiver. */
export interface WebhookReceiver {
  /** `https://127.0.0.1:PORT/hook` */
  url: string;
  /** A PEM file Parley must trust (WEBHOOK_CA_FILE). */
  caFile: string;
  /** Arrival time (ms, epoch) and latency after commit (ms) of every delivery. */
  deliveries: { at: number; latencyMs: number }[];
  stop(): Promise<void>;
}

/** Starts a receiver on a free loopback port. */
export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const { cert, key } = await selfSignedCertificate(["localhost"]);
  const caFile = await Deno.makeTempFile({ suffix: ".pem" });
  await Deno.writeTextFile(caFile, cert);
  const deliveries: WebhookReceiver["deliveries"] = [];
  const server = Deno.serve(
    { port: 0, hostname: "127.0.0.1", cert, key, onListen: () => {} },
    async (request) => {
      const event = await request.json();
      const createdAt = Date.parse(event.data?.message?.created_at ?? event.created_at);
      const now = Date.now();
      deliveries.push({ at: now, latencyMs: now - createdAt });
      return new Response(null, { status: 204 });
    },
  );
  return {
    url: `https://127.0.0.1:${server.addr.port}/hook`,
    caFile,
    deliveries,
    async stop() {
      await server.shutdown();
      await Deno.remove(caFile);
    },
  };
}
