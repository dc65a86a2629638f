// Package streaming turns the tokens an engine accepts into the chunks a
// consumer reads, and keeps the stream contract (DESIGN.md §2) while doing it.
//
// It knows nothing about models: an engine hands it token ids and a
// Vocabulary that maps ids to their raw piece bytes. The pieces that do the
// work are small and separately testable:
//
//   - Sanitizer: raw bytes in, well-formed UTF-8 out, byte-for-byte equal to
//     Python's bytes.decode("utf-8", "replace") of the whole stream.
//   - StopMatcher: finds stop strings across chunk boundaries while holding
//     back only what could still become a match.
//   - Channel: the bounded queue a consumer pops from, with a readiness file
//     descriptor; its producer side (Sink) is handed only to the runtime.
//   - Batch: per-slot stream state kept in lockstep with the engine's batch,
//     and the decode and emit stages run once per iteration.
package streaming
