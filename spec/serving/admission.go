package serving

import "time"

// BestEffortTTFT is the first-token deadline a request without
// "ttft_slo_ms" is admitted by. A finite one keeps such requests from
// starving behind a stream of requests that do carry a TTFT SLO: once they
// have waited this long they go ahead of any later arrival.
const BestEffortTTFT = 10 * time.Second

// TTFTDeadline is when a request submitted at `submitted` (unix
// nanoseconds, or any common origin) must emit its first token:
// submitted + ttft_slo_ms, or submitted + BestEffortTTFT without an SLO.
// Free slots go to the waiting request with the earliest deadline, so a
// request with a tight TTFT SLO overtakes relaxed ones queued before it,
// while among equal SLOs the order stays first come, first served.
func TTFTDeadline(submitted int64, ttftSLOMs float64) int64 {
	if ttftSLOMs > 0 {
		return submitted + int64(ttftSLOMs*float64(time.Millisecond))
	}
	return submitted + int64(BestEffortTTFT)
}

// AdmissionDeadline is the key a queued request is admitted by: its
// TTFTDeadline, or with fcfs its submission time alone, so that requests
// are admitted first come, first served whatever their TTFT SLOs (the
// vLLM and Sarathi-Serve baselines). The engine loop (core/loop) and the
// simulator (spec/sim) both admit by it.
func AdmissionDeadline(submitted int64, ttftSLOMs float64, fcfs bool) int64 {
	if fcfs {
		return submitted
	}
	return TTFTDeadline(submitted, ttftSLOMs)
}

// NextToAdmit is the index in queue (non-empty, in arrival order) of the
// item to admit next: the earliest deadline, the earliest queued among
// equals (so the batch items of one request stay together and in order).
// The engine loop (core/loop) admits by it, and the AdaServe simulator
// (spec/sim) too, so that both order admission the same way.
func NextToAdmit[T any](queue []T, deadline func(T) int64) int {
	best, bd := 0, deadline(queue[0])
	for i := 1; i < len(queue); i++ {
		if d := deadline(queue[i]); d < bd {
			best, bd = i, d
		}
	}
	return best
}
