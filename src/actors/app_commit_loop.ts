/**
 * The commit loop of the application actors, as their worker runs it: batches of `commit`, each
 * application's part of a batch ending at a click (see `endsBatch` in `db/write_batch.ts`), a
 * command that failed because the database was not reached answered as retryable.
 */
import { type CommitLoop, type CommitLoopOptions, createCommitLoop } from "./commit_loop.ts";
import { endsBatch } from "../db/write_batch.ts";
import { isTransientDatabaseError } from "../db/transient_retry.ts";

/** Creates the application actors' commit loop over `commit` (`commitBatch` in production). */
export function createAppCommitLoop(
  commit: CommitLoopOptions["commit"],
  options: Omit<CommitLoopOptions, "commit" | "endsBatch" | "isRetryable"> = {},
): CommitLoop {
  return createCommitLoop({ ...options, commit, endsBatch, isRetryable: isTransientDatabaseError });
}
