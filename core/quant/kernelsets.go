package quant

import (
	"fmt"
	"strings"
)

// KernelSetNames lists the kernel sets by name, from the pure-Go reference
// up: the values KernelsEnv and SelectKernels take. A CPU runs a prefix of
// them, not always all of it (KernelSets).
var KernelSetNames = []string{"generic", "avx2", "avxvnni", "avx512vnni", "amx"}

// KernelSets lists the kernel sets this CPU and build can run, in the order
// of KernelSetNames.
func KernelSets() []string {
	var sets []string
	for _, s := range KernelSetNames {
		if canRun(s) {
			sets = append(sets, s)
		}
	}
	return sets
}

// SelectKernels makes the kernel set named set (one of KernelSets; "" for
// the start-up default: the best this CPU has, capped by KernelsEnv) the
// SIMD set and activates it, so that one machine can measure or test
// every set it can execute. It fails, changing nothing, for a set the CPU
// cannot run. Not safe concurrently with matmuls. Call it before packing
// weights (Prepack, model load): a matrix packed for another set still
// gives correct results, but may fall back to the slower unpacked kernels.
func SelectKernels(set string) error {
	if set != "" && !canRun(set) {
		return fmt.Errorf("quant: this CPU cannot run the %q kernels (it runs %s)", set, strings.Join(KernelSets(), ", "))
	}
	k := genericKernels
	if set == "" {
		setupSIMD(&k)
	} else {
		setupSIMDUpTo(&k, set)
	}
	simdKernels = k
	active.Store(&simdKernels)
	return nil
}
