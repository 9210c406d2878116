import assert from "node:assert/strict";
import { roundRobin } from "./round_robin_claim.ts";

const room = { roomOfBusy: new Map<number, number>(), roomOfIdle: 8 };

Deno.test("roundRobin() starts each round after the application served last in the one before", async () => {
  const afters: number[] = [];
  const turns = [[{ appId: 3, turn: 1 }, { appId: 7, turn: 2 }], [], [{ appId: 2, turn: 1 }]];
  const claim = roundRobin((_limit, _room, after) => {
    afters.push(after);
    return Promise.resolve({ rows: turns.shift()!, walkedTo: null });
  });
  for (let round = 0; round < 3; round++) assert.equal((await claim(8, room)).more, false);
  // After 7 (the highest turn), then 7 again: an empty round serves nobody.
  assert.deepEqual(afters, [0, 7, 7]);
});

Deno.test("roundRobin() asks for more while rounds stop at their bound, until they come around", async () => {
  const afters: number[] = [];
  // Applications 1..1000 in a ring; each round stops 300 further on.
  const stops = [300, 600, 900, 200, 500];
  const claim = roundRobin((_limit, _room, after) => {
    afters.push(after);
    return Promise.resolve({ rows: [], walkedTo: stops.shift()! });
  });
  const mores: boolean[] = [];
  for (let round = 0; round < 5; round++) mores.push((await claim(8, room)).more);
  // The fourth round wraps past where the first started (0): enough. The next cycle starts at 200.
  assert.deepEqual(mores, [true, true, true, false, true]);
  assert.deepEqual(afters, [0, 300, 600, 900, 200]);
});

Deno.test("roundRobin() ends a cycle that started mid-ring when a round passes its start", async () => {
  const afters: number[] = [];
  const stops = [700, 100, 400, 650, 900, 150];
  const claim = roundRobin((_limit, _room, after) => {
    afters.push(after);
    return Promise.resolve({ rows: [], walkedTo: stops.shift()! });
  });
  const mores: boolean[] = [];
  for (let round = 0; round < 6; round++) mores.push((await claim(8, room)).more);
  // From 0: 0→700, then 700→100 wraps past 0 (done). From 100: 100→400, 400→650, 650→900, then
  // 900→150 wraps past 100 (done).
  assert.deepEqual(afters, [0, 700, 100, 400, 650, 900]);
  assert.deepEqual(mores, [true, false, true, true, true, false]);
});
