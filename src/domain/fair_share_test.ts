import assert from "node:assert/strict";
import fc from "fast-check";
import { slotRoom } from "./fair_share.ts";

Deno.test("slotRoom() keeps an eighth of the slots for a newcomer and shares the rest", () => {
  assert.deepEqual(slotRoom(new Map(), 64), { roomOfBusy: new Map(), roomOfIdle: 56 });
  // Alone at its share: nothing more for it, while a newcomer may start in the slots kept free.
  assert.deepEqual(slotRoom(new Map([[7, 56]]), 64), {
    roomOfBusy: new Map([[7, 0]]),
    roomOfIdle: 28,
  });
  assert.deepEqual(slotRoom(new Map([[7, 50], [9, 1]]), 64), {
    roomOfBusy: new Map([[7, 0], [9, 27]]),
    roomOfIdle: 19,
  });
  // Too few slots to keep any: every slot is shared.
  assert.deepEqual(slotRoom(new Map([[7, 1]]), 4), {
    roomOfBusy: new Map([[7, 3]]),
    roomOfIdle: 2,
  });
});

Deno.test("slotRoom() never lets an application start beyond its share, and shares the slots", () => {
  fc.assert(fc.property(
    fc.integer({ min: 1, max: 128 }),
    fc.array(fc.integer({ min: 1, max: 128 }), { maxLength: 40 }),
    (slots, counts) => {
      const inFlight = new Map(counts.map((count, index) => [index, count]));
      const room = slotRoom(inFlight, slots);
      const shared = slots - Math.floor(slots / 8);
      const share = Math.ceil(shared / Math.max(1, inFlight.size));
      for (const [key, count] of inFlight) {
        const free = room.roomOfBusy.get(key)!;
        assert.ok(free >= 0);
        assert.equal(count + free, Math.max(count, share));
      }
      // Equal shares cover the shared slots, and a newcomer always gets at least one.
      assert.ok(share * Math.max(1, inFlight.size) >= shared);
      assert.ok(room.roomOfIdle >= 1 && room.roomOfIdle <= shared);
    },
  ));
});
