/**
 * Statements sent ahead in a pipelined transaction. A step may send several statements before
 * awaiting any: when one fails, the transaction is aborted and every later one fails too, but
 * only the first awaited failure is reported (and the batch rolled back and retried). A
 * statement whose promise nobody awaits after that would be an unhandled rejection, which
 * takes a worker down in the middle of its rollback.
 */

/** Marks `promise` as handled (its failure is the transaction's) and returns it unchanged. */
export function sentAhead<T>(promise: Promise<T>): Promise<T> {
  promise.catch(() => {});
  return promise;
}
