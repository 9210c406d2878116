-- WhatsApp sends leave in order per customer, whichever of their conversations they are in (all
-- reach the one chat on the customer's phone): a send carries its client, and a claim probes this
-- index for an earlier pending send to the same customer.
UPDATE outbox o SET payload = o.payload || jsonb_build_object('client_id', c.client_id)
FROM conversations c
WHERE o.kind = 'whatsapp' AND o.state = 'pending'
  AND c.app_id = o.app_id AND c.id = (o.payload ->> 'conversation_id')::bigint;

CREATE INDEX outbox_pending_whatsapp_by_client
  ON outbox (kind, app_id, ((payload ->> 'client_id')::bigint), id)
  WHERE state = 'pending' AND kind = 'whatsapp';
